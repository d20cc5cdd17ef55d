"""`ember explain ID`: why Ember believes a fact, or why shadow proposed something.

The host's explain_fact when the connected role may run it; the analyst's explain (evidence
bounded, nothing of an isolated thread, and how the item fares in the comparison) for a
proposal, on --analyst, or for a role such as ember_analyst that may run nothing else.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ember import sqlstates
from ember.commands.base import EXIT_NOT_FOUND, EXIT_REFUSED, CliError


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    explain = sub.add_parser(
        "explain",
        parents=[common],
        help="why Ember believes a fact (or why shadow proposed something): evidence, run, "
        "merges, history, and how it fares in the comparison",
    )
    explain.add_argument(
        "id", type=int, metavar="ID", help="a fact id, or with --proposal a proposal id"
    )
    explain.add_argument(
        "--proposal", action="store_true", help="ID is a shadow proposal (the analyst's explain)"
    )
    explain.add_argument(
        "--analyst",
        action="store_true",
        help="the analyst's explain of a fact even when this role may run the host's",
    )
    explain.add_argument("--json", action="store_true", help="print the explain JSON as is")
    explain.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ember.commands.base import migrated_url

    url = migrated_url()

    import psycopg

    from ember import queries
    from ember.explain import format_explanation

    try:
        with psycopg.connect(url) as conn:
            may = conn.execute(queries.CAN_EXPLAIN).fetchone()
            host, analyst = bool(may and may[0]), bool(may and may[1])
            if args.proposal:
                statement = queries.EXPLAIN_PROPOSAL_ANALYST
            elif host and not args.analyst:
                statement = queries.EXPLAIN_FACT
            else:
                statement = queries.EXPLAIN_FACT_ANALYST
            if statement is not queries.EXPLAIN_FACT and not analyst:
                raise CliError(
                    EXIT_REFUSED,
                    "this role may not read the comparison's explain (grant it ember_analyst)",
                )
            row = conn.execute(statement, {"id": args.id}).fetchone()
    except psycopg.Error as exc:
        # No such fact or proposal (EM095), or one of an isolated thread (EM074): the message
        # names the id, never the thread.
        if exc.sqlstate == sqlstates.UNKNOWN_ID:
            raise CliError(EXIT_NOT_FOUND, str(exc.diag.message_primary)) from exc
        if exc.sqlstate == sqlstates.NOT_FOR_THE_ANALYST:
            raise CliError(EXIT_REFUSED, str(exc.diag.message_primary)) from exc
        raise
    doc: dict[str, Any] = row[0] if row else {}
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        print(format_explanation(doc))
    return 0
