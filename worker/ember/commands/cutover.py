"""`ember cutover`: give a scope of threads to shadow from now on, or take it back, with a dry run.

The scope is `thread:ID`, `category:NAME` or `all`. The dry run reads ember.cutover_plan, which
computes what the real call would do from the same rules and writes nothing; the real call is
ember.cut_over or ember.cutover_rollback (docs/cutover.md). Both print the comparison's numbers
for the scope, since the decision to switch rests on them.
"""

from __future__ import annotations

import argparse
import getpass
import json
from typing import Any

from ember.commands.base import EXIT_REFUSED, EXIT_USAGE, CliError


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    cut = sub.add_parser(
        "cutover",
        parents=[common],
        help="switch a thread, a category or all threads from the steward to shadow, or back "
        "(docs/cutover.md)",
    )
    cut.add_argument(
        "--scope", required=True, metavar="SCOPE", help="thread:ID, category:NAME or all"
    )
    cut.add_argument("--rollback", action="store_true", help="give the scope back to the steward")
    cut.add_argument(
        "--dry-run", action="store_true", help="print what would change, and change nothing"
    )
    cut.add_argument("--by", help="who decides (kept with the cut-over; default: the OS user)")
    cut.add_argument("--note", help="why (kept with the cut-over)")
    cut.add_argument("--json", action="store_true", help="print the SQL function's answer")
    cut.set_defaults(run=run)


def parse_scope(text: str) -> tuple[str, str | None]:
    """`thread:ID`, `category:NAME` or `all` as (scope, value)."""
    if text == "all":
        return "all", None
    kind, sep, value = text.partition(":")
    if not sep or kind not in ("thread", "category") or not value:
        raise CliError(EXIT_USAGE, f"--scope {text!r}: expected thread:ID, category:NAME or all")
    return kind, value


def _ratio(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.0%}"


def describe(result: dict[str, Any], *, dry_run: bool) -> str:
    """What changed (or would change), and the comparison's numbers for the scope."""
    rollback = result.get("action") == "rollback"
    scope = result.get("scope", "")
    if result.get("value") is not None:
        scope = f"{scope}:{result['value']}"
    threads = result.get("threads") or []
    verb = "would" if dry_run else "did"
    lines = [
        f"{'rollback' if rollback else 'cut-over'} of {scope}"
        + (f" (cut-over {result['cutover_id']})" if result.get("cutover_id") else ""),
        f"threads: {len(threads)} {', '.join(threads)}".rstrip(),
    ]
    if result.get("refused"):
        lines.append(f"refused: {result['refused']}")
    if rollback:
        retired = result.get("retired_facts", result.get("facts_to_retire")) or []
        kept = result.get("kept_facts", result.get("facts_to_keep")) or []
        returned = result.get("rows_returned", result.get("rows_after_point"))
        lines += [
            f"the steward {verb} read again from seq {result.get('from_seq')}: {returned} rows",
            f"promoted facts: {len(retired)} {'would be ' if dry_run else ''}retired {retired},"
            f" {len(kept)} kept (the steward confirmed them) {kept}",
        ]
    else:
        lines += [
            f"from seq {result.get('from_seq')} on, the scope's new rows are shadow's;"
            f" the steward still digests {result.get('steward_rows_to_digest')} rows before it",
        ]
    promotions = result.get("promotions")
    if promotions:
        lines.append(
            f"promotions so far: {promotions.get('promoted')} promoted,"
            f" {promotions.get('already_stated')} already stated,"
            f" {promotions.get('refused')} refused"
        )
    c = result.get("comparison") or {}
    usd = c.get("shadow_usd")
    cost = "n/a" if usd is None else f"${float(usd):.4f}"
    lines.append(
        f"comparison for the scope: {c.get('facts')} steward facts, {c.get('proposals')} shadow"
        f" proposals ({c.get('rejected_proposals')} rejected); coverage exact"
        f" {_ratio(c.get('exact_coverage'))}, evidence {_ratio(c.get('evidence_coverage'))},"
        f" semantic {_ratio(c.get('semantic_coverage'))}; shadow cost {cost}"
    )
    if dry_run:
        lines.append("dry run: nothing was changed")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from ember import queries
    from ember.commands._db import connect

    scope, value = parse_scope(args.scope)
    by = args.by or getpass.getuser()
    with connect() as conn:
        if args.dry_run:
            row = conn.execute(
                queries.CUTOVER_PLAN,
                {"scope": scope, "value": value, "rollback": args.rollback},
            ).fetchone()
        elif args.rollback:
            row = conn.execute(
                queries.CUTOVER_ROLLBACK, {"scope": scope, "value": value, "by": by}
            ).fetchone()
        else:
            row = conn.execute(
                queries.CUT_OVER,
                {"scope": scope, "value": value, "by": by, "note": args.note},
            ).fetchone()
    result: dict[str, Any] = row[0] if row else {}
    if args.json:
        print(json.dumps({**result, "dry_run": bool(args.dry_run)}, indent=2, default=str))
    else:
        print(describe(result, dry_run=args.dry_run))
    return EXIT_REFUSED if args.dry_run and result.get("refused") else 0
