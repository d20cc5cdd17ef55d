"""`ember setup-test-tools` and `ember testdb`: what `make test` needs."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    tools = sub.add_parser(
        "setup-test-tools",
        parents=[common],
        help="install pgTAP, pg_prove, objdump and Chromium for the tests (Debian packages)",
    )
    tools.set_defaults(run=run_setup)

    testdb = sub.add_parser(
        "testdb", parents=[common], help="recreate and migrate a test database; print its URL"
    )
    testdb.add_argument("--name", default="ember_test")
    testdb.add_argument("--no-pgtap", action="store_true")
    testdb.set_defaults(run=run_testdb)


def run_setup(args: argparse.Namespace) -> int:
    from ember.config import uses_embedded
    from ember.debian import describe
    from ember.devsetup import ensure_chromium, ensure_objdump, ensure_pgtap
    from ember.embedded import EmbeddedServer

    if uses_embedded():
        EmbeddedServer().start()
    ensure_pgtap()
    print("pgTAP ready")
    print(f"objdump ready: {ensure_objdump()}")
    print(f"Chromium ready: {ensure_chromium()}")
    print(f"Debian packages used:\n{describe()}")
    return 0


def run_testdb(args: argparse.Namespace) -> int:
    from ember.commands.base import checked_url
    from ember.devsetup import check_test_database, fresh_database
    from ember.migrate import sql_root

    url = checked_url()
    check_test_database(url, args.name)
    fresh, _ = fresh_database(url, args.name, root=sql_root(), pgtap=not args.no_pgtap)
    print(fresh)
    return 0
