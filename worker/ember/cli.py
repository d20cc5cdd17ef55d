"""The `ember` command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from ember.config import database_url, uses_embedded
from ember.devsetup import SetupError, ensure_pgtap, fresh_database
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


def _cmd_testdb(args: argparse.Namespace) -> int:
    url, _ = fresh_database(database_url(), args.name, root=project_root(), pgtap=not args.no_pgtap)
    print(url)
    return 0


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

    testdb = sub.add_parser("testdb", help="recreate and migrate a test database; print its URL")
    testdb.add_argument("--name", default="ember_test")
    testdb.add_argument("--no-pgtap", action="store_true")
    testdb.set_defaults(func=_cmd_testdb)

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
