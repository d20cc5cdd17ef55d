"""docs/operations.md's distribution plan is the plan the lint checks.

The lists live in functions/004_distribution_plan.sql; the document's block is rendered from
them, so a table added to the plan (or a hot-path function, or a command) and not to the
document fails here, as a table added to the schema and not to the plan fails the pgTAP lint.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from ember import distribution

ROOT = Path(__file__).resolve().parents[1]


def test_the_documented_plan_is_the_plan(db: str) -> None:
    text = (ROOT / "docs" / "operations.md").read_text()
    documented = distribution.current_block(text)
    assert documented is not None, "docs/operations.md has lost the distribution plan's markers"
    with psycopg.connect(db) as conn:
        rendered = distribution.render(conn)
    assert documented == rendered, (
        "docs/operations.md's distribution plan differs from functions/004_distribution_plan.sql: "
        "run `python -m ember.distribution --write`"
    )


def test_every_planned_table_is_converted_in_the_commands(db: str) -> None:
    with psycopg.connect(db) as conn:
        planned = {
            (str(t), str(r))
            for t, r, _c, _w in conn.execute("SELECT * FROM ember.distribution_plan()")
            if r != "local"
        }
        commands = "\n".join(
            str(c[0]) for c in conn.execute("SELECT * FROM ember.distribution_commands()")
        )
    for table, role in planned:
        call = "create_reference_table" if role == "reference" else "create_distributed_table"
        assert f"{call}('ember.{table}'" in commands, f"{table} ({role}) is not converted"
    assert commands.index("create_distributed_table('ember.threads'") < commands.index(
        "create_distributed_table('ember.messages'"
    ), "threads, the co-location anchor, is distributed before the tables co-located with it"
