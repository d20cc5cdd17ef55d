"""`ember forget`: forget_thread / forget_messages from the command line, with a dry run.

The dry run calls the same function inside a transaction and rolls it back: what it prints is
exactly what the real call would erase, computed by the same code, and nothing of it stays (no
row, no history entry, no cancel sent: a notification is delivered only at commit).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ember.commands.base import EXIT_USAGE, CliError, add_tenant_argument


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    forget = sub.add_parser(
        "forget",
        parents=[common],
        help="erase a thread or messages, and everything derived from them (docs/forgetting.md)",
    )
    what = forget.add_mutually_exclusive_group(required=True)
    what.add_argument("--thread", metavar="THREAD", help="every row of this thread")
    what.add_argument("--messages", metavar="ID[,ID...]", help="these message ids")
    forget.add_argument("--reason", required=True, help="why (kept in the history)")
    add_tenant_argument(forget, "whose thread or messages")
    forget.add_argument(
        "--dry-run", action="store_true", help="print what would go, and change nothing"
    )
    forget.add_argument("--json", action="store_true", help="print the SQL function's answer")
    forget.set_defaults(run=run)


class _DryRun(Exception):
    """Raised inside the transaction to roll it back after the answer is read."""


def _ids(text: str) -> list[int]:
    try:
        ids = [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError as exc:
        raise CliError(EXIT_USAGE, f"--messages {text!r}: expected message ids like 12,13") from exc
    if not ids:
        raise CliError(EXIT_USAGE, "--messages: at least one message id")
    return ids


def _count(result: dict[str, Any], key: str) -> int:
    return len(result.get(key) or [])


def describe(result: dict[str, Any], *, dry_run: bool) -> str:
    """What went (or would go), in a few lines."""
    if result.get("noop"):
        already = result.get("already_forgotten")
        return "nothing to forget: " + (
            f"messages {', '.join(map(str, already))} were already forgotten"
            if already
            else f"thread {result.get('thread')} has no rows left"
        )
    verb = "would" if dry_run else "did"
    erased = result.get("rows_erased") or []
    retired = result.get("facts_retired") or []
    kept = [k["fact"] for k in result.get("facts_kept") or []]
    ids = ", ".join(map(str, erased))
    lines = [
        f"{'would erase' if dry_run else 'erased'} {len(erased)} rows: {ids}",
        f"facts: {len(retired)} retired as source-forgotten {retired},"
        f" {len(kept)} kept with fewer pointers {kept}",
        f"shadow proposals: {_count(result, 'proposals_erased')} erased,"
        f" {_count(result, 'proposals_kept')} kept",
        f"the steward's record: {_count(result, 'steward_rows_redacted')} rows redacted",
        f"work in flight: {_count(result, 'runs_cancelled')} shadow runs and"
        f" {_count(result, 'steward_runs_cancelled')} steward runs {verb} stop",
    ]
    if dry_run:
        lines.append("dry run: nothing was changed")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from ember import queries
    from ember.commands._db import connect

    if args.thread is not None:
        query = queries.FORGET_THREAD
        params: dict[str, Any] = {"thread": args.thread, "reason": args.reason}
    else:
        ids = _ids(args.messages)
        query, params = queries.FORGET_MESSAGES, {"ids": ids, "reason": args.reason}
    params["tenant"] = args.tenant
    result: dict[str, Any] = {}
    with connect(autocommit=False) as conn:
        try:
            with conn.transaction():
                row = conn.execute(query, params).fetchone()
                result = row[0] if row else {}
                if args.dry_run:
                    raise _DryRun
        except _DryRun:
            pass
    if args.json:
        print(json.dumps({**result, "dry_run": bool(args.dry_run)}, indent=2))
    else:
        print(describe(result, dry_run=args.dry_run))
    return 0
