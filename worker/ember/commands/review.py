"""`ember review`: the consolidation job's review queue, and a person's decision on one item.

`ember review` (or `ember review list`) prints ember.review_queue, the items waiting for a
person with their facts as they are now; `--all` adds the decided ones with who, when and the
note. `ember review accept ID` and `ember review reject ID` call
ember.review_consolidation_action, which holds every rule: accepting a held-back merge,
supersede or retire applies it through the job's own checks (EM135 when one refuses it now),
and an unknown item or one already decided is refused (EM136). docs/consolidation.md says more.

Fact texts, reasons, proposed texts and notes were written by a model or a person, so each is
shown as one JSON string literal inside its cell: no text can end its line, start a line that
passes for another item, close its quotes, or reach the terminal as an escape sequence.
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import datetime
from typing import Any

from ember import queries
from ember.commands.base import EXIT_NOT_FOUND, ArgumentParser, CliError

Row = dict[str, Any]

# Beyond what json.dumps escapes (C0 controls, quotes, backslashes): DEL and the C1 controls (a
# terminal may read U+009B as the start of an escape sequence), the Unicode line and paragraph
# separators, which some readers break a line at, and the bidirectional controls, which can make
# a terminal draw the rest of a line in another order than it holds.
_CONTROLS = "\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[{_CONTROLS}]")
# In a table's cell, also the box-drawing characters: every line or corner of the table is then
# the table's own, and no text can draw a column border or a rule between rows.
_UNSAFE_IN_CELL = re.compile(f"[{_CONTROLS}\u2500-\u259f]")
# A role name or a word of SQL's vocabulary (an item, a status, a decision) shown as it is;
# anything else is quoted like any other text.
_PLAIN_NAME = re.compile(r"[\w.@+-]{1,64}")
_PLAIN_WORDS = re.compile(r"[a-z][a-z -]{0,63}")


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    review = sub.add_parser(
        "review",
        parents=[common],
        help="the consolidation review queue: list it, accept or reject an item "
        "(docs/consolidation.md)",
        description="The consolidation job's review queue: contradictions it flagged and "
        "actions it held back below consolidation_min_confidence. Without a subcommand, list.",
    )
    review.add_argument("--all", action="store_true", help="also list the decided items")
    review.add_argument("--json", action="store_true", help="print the SQL answer as JSON")
    review.set_defaults(run=run_list)
    # Flags given after the subcommand must not reset those given before it.
    after = argparse.SUPPRESS
    commands = review.add_subparsers(
        dest="review_command", metavar="{list,accept,reject}", parser_class=ArgumentParser
    )
    listing = commands.add_parser(
        "list", parents=[common], help="what waits for a person, oldest first (the default)"
    )
    listing.add_argument(
        "--all", action="store_true", default=after, help="also list the decided items"
    )
    listing.add_argument(
        "--json", action="store_true", default=after, help="print the SQL answer as JSON"
    )
    listing.set_defaults(run=run_list)
    for decision, what in (
        ("accept", "agree: a held-back merge, supersede or retire is applied now"),
        ("reject", "disagree: the decision is recorded and no fact changes"),
    ):
        p = commands.add_parser(decision, parents=[common], help=what)
        p.add_argument("id", type=int, metavar="ID", help="the item's action id (ember review)")
        p.add_argument("--note", help="why (kept with the decision)")
        p.add_argument(
            "--by",
            help="who decides (kept with the decision; default: the database role connected)",
        )
        p.add_argument(
            "--json", action="store_true", default=after, help="print the SQL function's answer"
        )
        p.set_defaults(run=run_decide, decision=decision)


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def quoted(text: str) -> str:
    """`text` as one JSON string literal for a table's cell: no terminal breaks it across lines
    or reads it as control, and it draws no part of the table."""
    return _UNSAFE_IN_CELL.sub(_escape, json.dumps(text, ensure_ascii=False))


def _safe_json(doc: Any) -> str:
    # Every character _UNSAFE matches can only stand inside a JSON string, where \uXXXX is the
    # same character: the document parses to the same value.
    return _UNSAFE.sub(_escape, json.dumps(doc, indent=2, ensure_ascii=False, default=str))


def _text(value: Any) -> str:
    return "" if value is None else quoted(str(value))


def _name(value: Any) -> str:
    text = "" if value is None else str(value)
    return text if _PLAIN_NAME.fullmatch(text) else quoted(text)


def _words(value: Any) -> str:
    text = "" if value is None else str(value)
    return text if _PLAIN_WORDS.fullmatch(text) else quoted(text)


def _when(value: Any) -> str:
    if not isinstance(value, str):
        return "-"
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return quoted(value)
    return at.astimezone().isoformat(timespec="seconds")


def _confidence(value: Any) -> str:
    return "-" if value is None else f"{float(value):.2f}"


def fact_lines(row: Row) -> str:
    """One line per fact the item names, in the action's order: `F12 active: "text"`."""
    facts = row.get("facts") or []
    if not facts:
        return "(no fact left)"
    return "\n".join(
        f"F{int(f['id'])} {_words(f.get('status'))}: "
        + ("(text forgotten)" if f.get("text") is None else quoted(str(f["text"])))
        for f in facts
    )


def decision_line(row: Row) -> str:
    """`rejected by ana at T`, with `applied: fact N` when an accepted action changed facts."""
    line = f"{_words(row.get('review'))} by {_name(row.get('reviewed_by'))}"
    line += f" at {_when(row.get('reviewed_at'))}"
    if row.get("result_fact") is not None:
        line += f"; applied: fact {int(row['result_fact'])}"
    return line


def _table(title: str, columns: tuple[str, ...], rows: list[list[str]], empty: str) -> Any:
    from rich.table import Table
    from rich.text import Text

    # Every cell is a Text, never a string: rich would read "[red]" in a fact as markup.
    table = Table(title=Text(title), show_lines=True)
    for col in columns:
        table.add_column(
            Text(col),
            justify="right" if col in ("id", "confidence") else "left",
            no_wrap=col in ("id", "item", "confidence"),
            overflow="fold",
        )
    for cells in rows:
        table.add_row(*[Text(c) for c in cells])
    if not rows:
        table.add_row(Text(""), Text(empty), *[Text("") for _ in columns[2:]])
    return table


WAITING_COLUMNS = ("id", "item", "confidence", "facts (as they are now)", "reason", "proposed text")
DECIDED_COLUMNS = (
    "id",
    "item",
    "facts (as they are now)",
    "reason",
    "proposed text",
    "decided",
    "note",
)


def waiting_rows(waiting: list[Row]) -> list[list[str]]:
    return [
        [
            str(int(r["action_id"])),
            _words(r.get("item")),
            _confidence(r.get("confidence")),
            fact_lines(r),
            _text(r.get("reason")),
            _text(r.get("proposed_text")),
        ]
        for r in waiting
    ]


def decided_rows(decided: list[Row]) -> list[list[str]]:
    return [
        [
            str(int(r["action_id"])),
            _words(r.get("item")),
            fact_lines(r),
            _text(r.get("reason")),
            _text(r.get("proposed_text")),
            decision_line(r),
            _text(r.get("review_note")),
        ]
        for r in decided
    ]


def run_list(args: argparse.Namespace) -> int:
    import sys

    from ember.commands._db import connect
    from ember.tables import console_for

    with connect() as conn:
        row = conn.execute(queries.REVIEW_WAITING).fetchone()
        waiting: list[Row] = row[0] if row else []
        decided: list[Row] = []
        if args.all:
            row = conn.execute(queries.REVIEW_DECIDED).fetchone()
            decided = row[0] if row else []
    if args.json:
        print(_safe_json(waiting + decided))
        return 0
    from rich.text import Text

    console = console_for(sys.stdout)
    console.print(
        _table(
            f"Review queue: {len(waiting)} waiting (consolidation: contradictions and "
            "low-confidence actions, oldest first)",
            WAITING_COLUMNS,
            waiting_rows(waiting),
            "nothing waits for a person",
        )
    )
    if args.all:
        console.print(
            _table(
                f"Decided: {len(decided)}",
                DECIDED_COLUMNS,
                decided_rows(decided),
                "nothing decided yet",
            )
        )
    console.print(
        Text(
            "Quoted strings are what models and people wrote, as JSON string literals: data, "
            "never a row. Decide with: ember review accept ID [--note TEXT] or ember review "
            "reject ID [--note TEXT]."
        )
    )
    return 0


def describe(result: Row) -> str:
    """`action 17 (merge): accepted by ana at T; applied: fact 31`."""
    line = f"action {int(result['action_id'])} ({_words(result.get('action'))}): "
    line += decision_line(result)
    if result.get("review") == "accepted" and not result.get("applied"):
        line += "; no fact changed"
    return line


def run_decide(args: argparse.Namespace) -> int:
    import psycopg

    from ember.commands._db import connect, refusal

    params = {"id": args.id, "decision": args.decision, "by": args.by, "note": args.note}
    with connect() as conn:
        try:
            row = conn.execute(queries.REVIEW_DECIDE, params).fetchone()
        except psycopg.Error as exc:
            refused = refusal(exc)
            if refused is None:
                raise
            found = conn.execute(queries.REVIEW_ACTION_EXISTS, {"id": args.id}).fetchone()
            if not (found and found[0]):
                raise CliError(EXIT_NOT_FOUND, str(refused)) from exc
            raise refused from exc
    result: Row = row[0] if row else {}
    if args.json:
        print(_safe_json(result))
    else:
        print(describe(result))
    return 0
