"""`ember search QUERY --viewer THREAD`: search_memory as that viewer, from the command line.

The viewer's labels decide what may be read, exactly as for the agent that asks: a fact carrying
a category the viewer's model is not tagged for is never listed (functions/053_steward_search.sql).
Text search by default; `--embed` adds the meaning search, with the worker's embedder.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ember.commands.base import add_tenant_argument


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    search = sub.add_parser(
        "search", parents=[common], help="search the facts a viewer may read (search_memory)"
    )
    search.add_argument("query", help="what to look for")
    search.add_argument(
        "--viewer",
        required=True,
        metavar="THREAD",
        help="the thread whose model's labels decide what may be read, or 'human'",
    )
    add_tenant_argument(search, "whose memory: the tenant the viewer belongs to")
    search.add_argument("--limit", type=int, default=10, help="at most this many facts (1-100)")
    search.add_argument(
        "--embed", action="store_true", help="also search by meaning, with the worker's embedder"
    )
    search.add_argument("--json", action="store_true", help="the facts as JSON")
    search.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ember import queries
    from ember.commands._db import connect

    vector = None
    if args.embed:
        from ember.embed import load_embedder

        vector = "[" + ",".join(repr(x) for x in load_embedder().embed([args.query])[0]) + "]"
    with connect() as conn:
        cur = conn.execute(
            queries.SEARCH_MEMORY,
            {
                "tenant": args.tenant,
                "viewer": args.viewer,
                "query": args.query,
                "embedding": vector,
                "limit": args.limit,
            },
        )
        names = [c.name for c in cur.description or []]
        facts: list[dict[str, Any]] = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    if args.json:
        print(json.dumps(facts, indent=2, ensure_ascii=False, default=str))
        return 0
    if not facts:
        print(f"no fact that {args.viewer} may read matches")
    for fact in facts:
        labels = f" [{', '.join(fact['categories'])}]" if fact["categories"] else ""
        print(f"{fact['fact_id']:>6}  {fact['evidence_kind']:<16} {fact['text']}{labels}")
    return 0
