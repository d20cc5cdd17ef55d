"""`ember compare`: shadow against the steward, as tables, JSON, HTML, or a semantic judge run."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ember.commands.base import EXIT_REJECTED, EXIT_USAGE


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    cmp = sub.add_parser(
        "compare", parents=[common], help="compare shadow with the steward (see README)"
    )
    cmp.add_argument("--since", help="window start: 2026-11-30, an ISO timestamp, or 7d, 24h, 30m")
    cmp.add_argument("--until", help="window end (exclusive), same formats; default now")
    cmp.add_argument("--json", action="store_true", help="the report as JSON")
    cmp.add_argument(
        "--format",
        choices=["table", "tsv"],
        default="table",
        help="tables for people (full width when written to a file or pipe) or TSV for tools",
    )
    cmp.add_argument("--html", metavar="FILE", help="write the report as one self-contained page")
    cmp.add_argument(
        "--rows",
        type=int,
        default=200,
        metavar="N",
        help="rows per drill-down section in --html and --json (default 200)",
    )
    cmp.add_argument("--semantic", action="store_true", help="judge semantic pairs with a model")
    cmp.add_argument("--dry-run", action="store_true", help="with --semantic: print, call nothing")
    cmp.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ember.commands.base import migrated_url, writable_target
    from ember.comparison.report import WindowError, parse_when

    try:
        since = parse_when(args.since) if args.since else None
        until = parse_when(args.until) if args.until else None
    except WindowError as exc:
        print(f"ember compare: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if since and until and since >= until:
        print("ember compare: --since must be before --until", file=sys.stderr)
        return EXIT_USAGE
    if args.rows < 0:
        print("ember compare: --rows must be 0 or more", file=sys.stderr)
        return EXIT_USAGE
    if args.html:
        writable_target(args.html)
    url = migrated_url()
    if args.semantic:
        return _semantic(url, since, until, dry_run=args.dry_run)
    return _report(url, since, until, args)


def _semantic(url: str, since: Any, until: Any, *, dry_run: bool) -> int:
    import psycopg

    from ember.comparison.judge import describe, run_semantic
    from ember.modelaccess import model_access

    def client() -> Any:
        access = model_access()  # exit 2, naming the variable, before any call
        from ember.worker.calls import make_client

        return make_client(access)

    with psycopg.connect(url, autocommit=True) as conn:
        results = run_semantic(conn, since, until, dry_run=dry_run, client_factory=client)
    print(describe(results))
    return EXIT_REJECTED if any(r.status == "failed" for r in results) else 0


def _report(url: str, since: Any, until: Any, args: argparse.Namespace) -> int:
    from ember.commands.base import output
    from ember.comparison import html
    from ember.comparison.report import collect, print_tables, read_only, to_json
    from ember.tables import console_for

    with read_only(url) as conn:
        report = collect(conn, since, until, rows_per_section=args.rows)
        if args.html:  # the latest `ember eval` run of this database, if any, as a section
            from ember.evaluation import html as eval_html
            from ember.evaluation.report import collect as collect_eval

            evaluation = collect_eval(conn)
    if args.html:
        with output(args.html) as out:
            out.write(html.render(report, [eval_html.section(evaluation)] if evaluation else []))
    if args.json:
        print(to_json(report))
    elif not args.html or args.format == "tsv":
        print_tables(report, console_for(sys.stdout, args.format))
    else:
        print(f"wrote {args.html}")
    return 0
