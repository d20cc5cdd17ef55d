"""The psql session in docs/sql-api.md runs as written and ends with a cold plan."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]


def test_the_sql_api_walkthrough_runs(db: str) -> None:
    text = (ROOT / "docs" / "sql-api.md").read_text()
    block = re.search(r"```sql\n(.*?)```", text, re.S)
    assert block is not None
    statements = [s.strip() for s in re.sub(r"--[^\n]*", "", block.group(1)).split(";")]
    last = None
    with psycopg.connect(db) as conn:
        for statement in filter(None, statements):
            cur = conn.execute(statement)  # type: ignore[call-overload]
            last = cur.fetchone() if cur.description else last
        ids = [r[0] for r in conn.execute("SELECT id FROM ember.messages ORDER BY seq")]
        header, day = conn.execute(
            "SELECT ember.render_page_header(ember.latest_generation('default', 'knee')),"
            " to_char(min(created_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD') FROM ember.messages"
        ).fetchone() or (None, None)
    assert last is not None
    plan = last[0]
    assert plan["path"] == "cold" and plan["model"] == "claude-haiku-4-5"
    assert str(header).startswith("# Knee rehab · thread knee · generation ")
    assert plan["pages"] == [
        [
            header,
            f"m:{ids[0]} user(human) {day}: I prefer morning physio sessions.",
            f"m:{ids[1]} assistant(agent): Booked mornings from now on.",
        ]
    ]
