"""The `ember` command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ember.config import database_url, uses_embedded
from ember.devsetup import SetupError, ensure_chromium, ensure_pgtap, fresh_database
from ember.embedded import EmbeddedError, EmbeddedServer, project_root
from ember.migrate import MigrationError, migrate


def _cmd_db(args: argparse.Namespace) -> int:
    server = EmbeddedServer()
    if args.action == "start":
        url = server.start()
        print(f"embedded PostgreSQL running: {url}")
    elif args.action == "stop":
        print("stopped" if server.stop() else "not running")
    elif args.action == "status":
        status = server.status()
        print(json.dumps(status, indent=2))
        return 0 if status["running"] else 3
    elif args.action == "url":
        # The URL alone, for scripts: `DATABASE_URL` wins, as everywhere else.
        print(database_url())
    return 0


def _cmd_migrate(args: argparse.Namespace) -> int:
    url = database_url()
    result = migrate(url, project_root())
    applied = ", ".join(result.applied) if result.applied else "none"
    print(f"migrations applied: {applied}")
    print(f"function files re-applied: {len(result.functions)}")
    return 0


def _cmd_setup_pgtap(args: argparse.Namespace) -> int:
    if uses_embedded():
        EmbeddedServer().start()
    ensure_pgtap()
    print("pgTAP ready")
    return 0


def _cmd_setup_chromium(args: argparse.Namespace) -> int:
    print(f"Chromium ready: {ensure_chromium()}")
    return 0


def _cmd_testdb(args: argparse.Namespace) -> int:
    url, _ = fresh_database(database_url(), args.name, root=project_root(), pgtap=not args.no_pgtap)
    print(url)
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from ember.comparison.report import WindowError, parse_when

    try:
        since = parse_when(args.since) if args.since else None
        until = parse_when(args.until) if args.until else None
    except WindowError as exc:
        print(f"ember compare: {exc}", file=sys.stderr)
        return 2
    if since and until and since >= until:
        print("ember compare: --since must be before --until", file=sys.stderr)
        return 2
    url = database_url()
    if args.semantic:
        return _compare_semantic(url, since, until, dry_run=args.dry_run)
    return _compare_report(url, since, until, as_json=args.json, html_file=args.html)


def _compare_semantic(url: str, since: Any, until: Any, *, dry_run: bool) -> int:
    import psycopg

    from ember.comparison.client import judge_client
    from ember.comparison.judge import describe, run_semantic

    with psycopg.connect(url, autocommit=True) as conn:
        results = run_semantic(conn, since, until, dry_run=dry_run, client_factory=judge_client)
    print(describe(results))
    return 1 if any(r.status == "failed" for r in results) else 0


def _compare_report(
    url: str, since: Any, until: Any, *, as_json: bool, html_file: str | None
) -> int:
    from pathlib import Path

    from rich.console import Console

    from ember.comparison import html
    from ember.comparison.report import collect, print_tables, read_only, to_json

    with read_only(url) as conn:
        report = collect(conn, since, until)
    if html_file:
        Path(html_file).write_text(html.render(report), encoding="utf-8")
    if as_json:
        print(to_json(report))
    elif not html_file:
        print_tables(report, Console())
    else:
        print(f"wrote {html_file}")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    import psycopg

    from ember.transfer import ImportFileError, run_import

    try:
        with psycopg.connect(database_url()) as conn:
            result = run_import(conn, Path(args.file), partial=args.partial)
    except ImportFileError as exc:
        print(f"ember import: {args.file}: {exc}", file=sys.stderr)
        return 1
    for line, reason in result.rejected:
        print(f"{args.file}:{line}: {reason}", file=sys.stderr)
    if not result.written:
        print(
            f"ember import: {len(result.rejected)} line(s) rejected; nothing imported "
            "(--partial imports the valid lines)",
            file=sys.stderr,
        )
        return 1
    print(
        f"imported {result.threads} threads, {result.generations} generations, "
        f"{result.messages} messages ({result.present} already present, "
        f"{len(result.rejected)} lines rejected)"
    )
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    import psycopg

    from ember.transfer import export_to

    with psycopg.connect(database_url()) as conn:
        if args.output == "-":
            export_to(conn, sys.stdout)
        else:
            with open(args.output, "w", encoding="utf-8", newline="\n") as out:
                export_to(conn, out)
    return 0


def _cmd_worker(args: argparse.Namespace) -> int:
    from ember.worker.cli import run_worker

    return run_worker(args)


def _cmd_sim(argv: Sequence[str]) -> int:
    from ember.sim.server import main as sim_main

    return sim_main(list(argv))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ember", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    db = sub.add_parser("db", help="the embedded development database")
    db.add_argument("action", choices=["start", "stop", "status", "url"])
    db.set_defaults(func=_cmd_db)

    mig = sub.add_parser("migrate", help="apply new migrations and re-apply functions")
    mig.set_defaults(func=_cmd_migrate)

    pgtap = sub.add_parser("setup-pgtap", help="install pgTAP and pg_prove for the tests")
    pgtap.set_defaults(func=_cmd_setup_pgtap)

    chromium = sub.add_parser("setup-chromium", help="install Chromium for the report's tests")
    chromium.set_defaults(func=_cmd_setup_chromium)

    testdb = sub.add_parser("testdb", help="recreate and migrate a test database; print its URL")
    testdb.add_argument("--name", default="ember_test")
    testdb.add_argument("--no-pgtap", action="store_true")
    testdb.set_defaults(func=_cmd_testdb)

    cmp = sub.add_parser("compare", help="compare shadow with the steward (see README)")
    cmp.add_argument("--since", help="window start: 2026-11-30, an ISO timestamp, or 7d, 24h, 30m")
    cmp.add_argument("--until", help="window end (exclusive), same formats; default now")
    cmp.add_argument("--json", action="store_true", help="the report as JSON")
    cmp.add_argument("--html", metavar="FILE", help="write the report as one self-contained page")
    cmp.add_argument("--semantic", action="store_true", help="judge semantic pairs with a model")
    cmp.add_argument("--dry-run", action="store_true", help="with --semantic: print, call nothing")
    cmp.set_defaults(func=_cmd_compare)

    from ember.worker.cli import add_parser as add_worker_parser

    add_worker_parser(sub).set_defaults(func=_cmd_worker)

    imp = sub.add_parser("import", help="import threads and messages from Ember JSONL")
    imp.add_argument("file", help="the JSONL file (docs/import-format.md)")
    imp.add_argument(
        "--partial", action="store_true", help="import the valid lines and report the rejected ones"
    )
    imp.set_defaults(func=_cmd_import)

    exp = sub.add_parser("export", help="write every thread and message as Ember JSONL")
    exp.add_argument("--output", "-o", default="-", help="file to write (default: stdout)")
    exp.set_defaults(func=_cmd_export)

    sub.add_parser("sim", help="the local Messages API simulator (see docs/sim.md)", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sim"]:
        return _cmd_sim(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (EmbeddedError, MigrationError, SetupError) as exc:
        print(f"ember {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
