"""The README's first three analyst queries run as ember_analyst and show what they promise."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg

import comparedata as data

ROOT = Path(__file__).resolve().parents[1]


def _analyst_queries() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Comparing shadow with the steward", 1)[1]
    block = re.search(r"```sql\n(.*?)```", section, re.S)
    assert block is not None
    body = re.sub(r"--[^\n]*", "", block.group(1))
    return [s.strip() for s in body.split(";") if s.strip()]


def test_the_readme_analyst_queries_run_as_ember_analyst(db: str) -> None:
    queries = _analyst_queries()
    assert len(queries) == 3
    with psycopg.connect(db) as conn:
        ids = data.seed_case(conn)
        role = conn.execute(
            "SELECT rolcanlogin FROM pg_roles WHERE rolname = 'ember_analyst'"
        ).fetchone()
        assert role == (False,)
        conn.execute("SET ROLE ember_analyst")
        results = [conn.execute(q).fetchall() for q in queries]  # type: ignore[call-overload]
        assert conn.execute("SELECT current_user").fetchone() == ("ember_analyst",)
    # The last seven days hold nothing of 2030: one empty, labelled row.
    assert len(results[0]) == 1
    assert {r[0] for r in results[1]} == {"shadow cold", "steward"}
    # The seed's pair and the diet pair share evidence without equal text; db's exact match does
    # not appear, and neither does anything of the sealed thread.
    assert set(results[2]) == {
        ("deploy", "部署使用独立工作区。", "部署有独立工作区"),
        ("diet", "No sugar any more", "The user avoids sugar"),
    }
    assert ids["p_secret"] > 0
