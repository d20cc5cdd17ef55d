"""The `ember` command line.

Exit codes (also in `ember --help`): 0 success; 1 an unexpected error (a bug: rerun with --debug
for the traceback); 2 a usage error; 3 the embedded server is not running; 4 the database cannot
be reached; 5 authentication failed; 6 a malformed DATABASE_URL; 7 the database's migrations do
not match this ember (missing, edited, failed or unknown migrations); 8 the embedded server or the
test tools could not be set up; 9 a refused request (e.g. a test database name that is not one).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ember.config import database_url, uses_embedded
from ember.devsetup import (
    RefusedError,
    SetupError,
    check_test_database,
    ensure_chromium,
    ensure_pgtap,
    fresh_database,
)
from ember.embedded import EmbeddedError, EmbeddedServer, NotRunningError
from ember.migrate import (
    MigrationError,
    describe_difference,
    function_files,
    migrate,
    sql_root,
    status,
)

EXIT_UNEXPECTED = 1
EXIT_USAGE = 2
EXIT_NOT_RUNNING = 3
EXIT_UNREACHABLE = 4
EXIT_AUTH = 5
EXIT_BAD_URL = 6
EXIT_MIGRATIONS = 7
EXIT_SETUP = 8
EXIT_REFUSED = 9
EXIT_REJECTED = 10

EXIT_CODES = """exit codes:
  0  success
  1  unexpected error (a bug: rerun with --debug for the traceback)
  2  usage error
  3  the embedded server is not running (ember db start)
  4  the database cannot be reached
  5  authentication to the database failed
  6  malformed DATABASE_URL
  7  the database's migrations do not match this ember (ember migrate --status)
  8  the embedded server or the test tools could not be set up
  9  refused (e.g. a test database name that is not clearly a test database)
 10  the command ran but rejected part of its work (import lines, judge groups): see stderr
"""


class CliError(Exception):
    """An expected failure: one line for the user and the exit code that names its kind."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _checked_url() -> str:
    """`DATABASE_URL` (parsed, so a malformed one is exit 6) or the embedded server's."""
    if uses_embedded():
        return database_url()
    url = database_url()
    try:
        conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise CliError(
            EXIT_BAD_URL,
            f"DATABASE_URL is malformed ({' '.join(str(exc).split())}); "
            "expected postgresql://user@host:port/db",
        ) from exc
    return url


def _where(url: str) -> str:
    """host:port/db of a URL, never its password."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the configured database"
    host = params.get("host") or "the local socket"
    port = f":{params['port']}" if params.get("port") else ""
    return f"{host}{port}/{params.get('dbname') or ''}"


_AUTH = re.compile(
    r"password authentication failed|no password supplied|authentication failed|"
    r"role \S+ does not exist|pg_hba\.conf rejects",
    re.IGNORECASE,
)


def _connection_error(exc: psycopg.OperationalError) -> CliError:
    detail = " ".join(str(exc).split())
    detail = re.sub(r"^connection failed: ", "", detail)
    try:
        where = _where(database_url()) if not uses_embedded() else "the embedded server"
    except Exception:
        where = "the database"
    if _AUTH.search(detail):
        return CliError(
            EXIT_AUTH,
            f"authentication to {where} failed ({detail}); check the user and password in "
            "DATABASE_URL (or its passfile)",
        )
    if "invalid" in detail and "connection is bad" in detail:
        return CliError(EXIT_BAD_URL, f"DATABASE_URL is malformed ({detail})")
    return CliError(
        EXIT_UNREACHABLE,
        f"cannot reach {where} ({detail}); is the server running and DATABASE_URL right?",
    )


# --- db ------------------------------------------------------------------------------------
def _cmd_db(args: argparse.Namespace) -> int:
    server = EmbeddedServer()
    if args.action == "start":
        url = server.start()
        print(f"embedded PostgreSQL running: {url}")
    elif args.action == "stop":
        print("stopped" if server.stop() else "not running")
    elif args.action == "status":
        report = server.status()
        print(json.dumps(report, indent=2))
        return 0 if report["running"] else EXIT_NOT_RUNNING
    elif args.action == "url":
        # The URL alone, for scripts: `DATABASE_URL` wins, as everywhere else. The embedded
        # server's URL only while it runs: a URL that nothing answers is worse than an error.
        if not uses_embedded():
            print(_checked_url())
        elif server.running_pid() is None:
            raise NotRunningError(
                "the embedded server is not running: start it with `ember db start`"
            )
        else:
            print(server.url())
    return 0


# --- migrate -------------------------------------------------------------------------------
def _cmd_migrate(args: argparse.Namespace) -> int:
    url = _checked_url()
    root = sql_root()
    if args.status or args.dry_run:
        st = status(url, root)
        if args.status:
            for label, names in (
                ("applied", st.applied),
                ("pending", st.pending),
                ("edited", st.edited),
                ("unknown", st.unknown),
            ):
                for name in names:
                    print(f"{label:8} {name}")
            print(f"functions {'current' if st.functions_current else 'stale'}")
            difference = describe_difference(st)
            if difference:
                print(difference, file=sys.stderr)
                return EXIT_MIGRATIONS
            return 0
        if st.edited or st.unknown:
            raise MigrationError(describe_difference(st) or "the migrations differ")
        for name in st.pending:
            print(f"would apply {name}")
        print(f"would re-apply {len(function_files(root))} function files (nothing was changed)")
        return 0
    result = migrate(url, root)
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
    url = _checked_url()
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
    return EXIT_REJECTED if any(r.status == "failed" for r in results) else 0


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
        with psycopg.connect(_checked_url()) as conn:
            result = run_import(conn, Path(args.file), partial=args.partial)
    except ImportFileError as exc:
        print(f"ember import: {args.file}: {exc}", file=sys.stderr)
        return EXIT_REJECTED
    for line, reason in result.rejected:
        print(f"{args.file}:{line}: {reason}", file=sys.stderr)
    if not result.written:
        print(
            f"ember import: {len(result.rejected)} line(s) rejected; nothing imported "
            "(--partial imports the valid lines)",
            file=sys.stderr,
        )
        return EXIT_REJECTED
    print(
        f"imported {result.threads} threads, {result.generations} generations, "
        f"{result.messages} messages ({result.present} already present, "
        f"{len(result.rejected)} lines rejected)"
    )
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    import psycopg

    from ember.transfer import export_to

    if args.facts:
        return export_facts(args.output)
    with psycopg.connect(_checked_url()) as conn:
        if args.output == "-":
            export_to(conn, sys.stdout)
        else:
            with open(args.output, "w", encoding="utf-8", newline="\n") as out:
                export_to(conn, out)
    return 0


def _cmd_worker(args: argparse.Namespace) -> int:
    from ember.worker.cli import run_worker

    return run_worker(args)


def _cmd_testdb(args: argparse.Namespace) -> int:
    url = _checked_url()
    check_test_database(url, args.name)
    fresh, _ = fresh_database(url, args.name, root=sql_root(), pgtap=not args.no_pgtap)
    print(fresh)
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    import psycopg

    from ember import queries
    from ember.explain import format_explanation

    try:
        with psycopg.connect(_checked_url()) as conn:
            row = conn.execute(queries.EXPLAIN_FACT, (args.fact_id,)).fetchone()
    except psycopg.Error as exc:
        if exc.sqlstate != "EM095":
            raise
        # No such fact: the message names it.
        print(f"ember explain: {exc.diag.message_primary}", file=sys.stderr)
        return 1
    doc: dict[str, Any] = row[0] if row else {}
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        print(format_explanation(doc))
    return 0


def export_facts(output: str) -> int:
    """`ember export --facts`: facts with pointers and history as JSONL (docs/export-facts.md)."""
    import psycopg

    from ember.export_facts import export_facts_to

    with psycopg.connect(_checked_url()) as conn:
        if output == "-":
            export_facts_to(conn, sys.stdout)
        else:
            with open(output, "w", encoding="utf-8", newline="\n") as out:
                count = export_facts_to(conn, out)
            print(f"exported {count} facts to {output}", file=sys.stderr)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from ember.demo.run import run

    try:
        return run(args)
    except KeyboardInterrupt:
        print("ember demo: stopped", file=sys.stderr)
        return 130


def _cmd_sim(argv: Sequence[str]) -> int:
    from ember.sim.server import main as sim_main

    return sim_main(list(argv))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ember",
        description=(__doc__ or "").splitlines()[0],
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="show a traceback on any failure")
    # Also accepted after the subcommand; SUPPRESS keeps a subparser from resetting it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    sub = parser.add_subparsers(dest="command", required=True)

    db = sub.add_parser("db", parents=[common], help="the embedded development database")
    db.add_argument("action", choices=["start", "stop", "status", "url"])
    db.set_defaults(func=_cmd_db)

    mig = sub.add_parser(
        "migrate", parents=[common], help="apply new migrations and re-apply functions"
    )
    mode = mig.add_mutually_exclusive_group()
    mode.add_argument(
        "--status",
        action="store_true",
        help="list applied, pending, edited and unknown migrations; exit 7 unless current",
    )
    mode.add_argument(
        "--dry-run", action="store_true", help="print what would run and change nothing"
    )
    mig.set_defaults(func=_cmd_migrate)

    pgtap = sub.add_parser(
        "setup-pgtap", parents=[common], help="install pgTAP and pg_prove for the tests"
    )
    pgtap.set_defaults(func=_cmd_setup_pgtap)

    chromium = sub.add_parser(
        "setup-chromium", parents=[common], help="install Chromium for the report's tests"
    )
    chromium.set_defaults(func=_cmd_setup_chromium)

    testdb = sub.add_parser(
        "testdb", parents=[common], help="recreate and migrate a test database; print its URL"
    )
    testdb.add_argument("--name", default="ember_test")
    testdb.add_argument("--no-pgtap", action="store_true")
    testdb.set_defaults(func=_cmd_testdb)

    cmp = sub.add_parser(
        "compare", parents=[common], help="compare shadow with the steward (see README)"
    )
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
    exp.add_argument(
        "--facts",
        action="store_true",
        help="write the facts instead, with evidence pointers and history (docs/export-facts.md)",
    )
    exp.set_defaults(func=_cmd_export)

    explain = sub.add_parser(
        "explain", help="why Ember believes a fact: evidence, run, merges, history"
    )
    explain.add_argument("fact_id", type=int)
    explain.add_argument("--json", action="store_true", help="print explain_fact()'s JSON as is")
    explain.set_defaults(func=_cmd_explain)

    from ember.demo.run import build_parser as add_demo_parser

    add_demo_parser(sub).set_defaults(func=_cmd_demo)

    sub.add_parser("sim", help="the local Messages API simulator (see docs/sim.md)", add_help=False)
    sub.add_parser("mcp", help="serve memory to MCP clients (see docs/mcp.md)", add_help=False)
    return parser


def _classify(exc: BaseException) -> CliError | None:
    """The expected failures, each with its exit code; None for a bug."""
    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, NotRunningError):
        return CliError(EXIT_NOT_RUNNING, str(exc))
    if isinstance(exc, EmbeddedError | SetupError):
        return CliError(EXIT_SETUP, str(exc))
    if isinstance(exc, RefusedError):
        return CliError(EXIT_REFUSED, str(exc))
    if isinstance(exc, MigrationError):
        return CliError(EXIT_MIGRATIONS, str(exc))
    if isinstance(exc, psycopg.OperationalError):
        return _connection_error(exc)
    return None


def _fail(command: str, code: int, message: str) -> int:
    # One line: a multi-line message (e.g. a server log tail) is folded, never dropped.
    line = " | ".join(part.strip() for part in message.strip().splitlines() if part.strip())
    print(f"ember {command}: {line}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sim"]:
        return _cmd_sim(argv[1:])
    if argv[:1] == ["mcp"]:
        from ember.mcp_server import main as mcp_main

        return mcp_main(argv[1:])
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return int(func(args))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if getattr(args, "debug", False):
            traceback.print_exc()
        known = _classify(exc)
        if known is not None:
            return _fail(args.command, known.code, str(known))
        hint = "" if getattr(args, "debug", False) else " (rerun with --debug for the traceback)"
        return _fail(
            args.command, EXIT_UNEXPECTED, f"unexpected error: {type(exc).__name__}: {exc}{hint}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
