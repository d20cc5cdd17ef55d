"""`ember explain FACT_ID`: why Ember believes a fact."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ember.commands.base import EXIT_NOT_FOUND, CliError


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    explain = sub.add_parser(
        "explain",
        parents=[common],
        help="why Ember believes a fact: evidence, run, merges, history",
    )
    explain.add_argument("fact_id", type=int)
    explain.add_argument("--json", action="store_true", help="print explain_fact()'s JSON as is")
    explain.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ember.commands.base import migrated_url

    url = migrated_url()

    import psycopg

    from ember import queries
    from ember.explain import format_explanation

    try:
        with psycopg.connect(url) as conn:
            row = conn.execute(queries.EXPLAIN_FACT, (args.fact_id,)).fetchone()
    except psycopg.Error as exc:
        if exc.sqlstate != "EM095":
            raise
        raise CliError(EXIT_NOT_FOUND, str(exc.diag.message_primary)) from exc
    doc: dict[str, Any] = row[0] if row else {}
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        print(format_explanation(doc))
    return 0
