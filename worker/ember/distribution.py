"""The distribution plan's block in docs/operations.md, rendered from the database.

The plan's lists live in functions/004_distribution_plan.sql; this renders them (and the
operator's commands generated from them) as the Markdown between the markers, so the document
and the lint read the same lists. `python -m ember.distribution --write` rewrites the block
against $DATABASE_URL (or the embedded server); tests/test_distribution_doc.py fails when it is
stale.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import psycopg

from . import queries

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
BEGIN = (
    "<!-- distribution plan: rendered from functions/004_distribution_plan.sql by "
    "`python -m ember.distribution --write`; edit the plan there, not here -->"
)
END = "<!-- end of the distribution plan -->"


def _cell(value: Any) -> str:
    return "" if value is None else str(value).replace("|", "\\|")


def render(conn: psycopg.Connection[Any]) -> str:
    """The block between the markers, markers included."""
    lines = [BEGIN, "", "| table | role | distributed by | why |", "|---|---|---|---|"]
    for table, role, column, why in conn.execute(queries.DISTRIBUTION_PLAN):
        by = f"`{column}`" if column else ""
        lines.append(f"| `{table}` | {role} | {by} | {_cell(why)} |")
    lines += [
        "",
        "The hot path, and how each function runs distributed:",
        "",
        "| function | part | distributed |",
        "|---|---|---|",
    ]
    for name, part, argument, shard in conn.execute(queries.DISTRIBUTION_HOT_PATH):
        how = f"one node, routed by `{argument}`" if shard == "single" else _cell(shard)
        lines.append(f"| `{name}` | {part} | {how} |")
    lines += ["", "The one-time commands, in order:", "", "```sql"]
    lines += [str(row[0]) for row in conn.execute(queries.DISTRIBUTION_COMMANDS)]
    lines += ["```", "", END]
    return "\n".join(lines)


def current_block(text: str) -> str | None:
    """The block as the document has it, or None when the markers are missing."""
    match = re.search(re.escape(BEGIN) + r".*?" + re.escape(END), text, re.S)
    return match.group(0) if match else None


def rewrite(text: str, block: str) -> str:
    """The document with its block replaced (the markers must be there)."""
    old = current_block(text)
    if old is None:
        raise ValueError(f"{DOC.name} has no distribution plan markers")
    return text.replace(old, block)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ember.distribution", description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite docs/operations.md's block")
    args = parser.parse_args(argv)
    from .config import database_url

    with psycopg.connect(database_url()) as conn:
        block = render(conn)
    if args.write:
        DOC.write_text(rewrite(DOC.read_text(), block))
    else:
        print(block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
