"""`ember migrate [--status | --dry-run] [--tenant NAME]`: new migrations once, then every
function file."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ember.commands.base import EXIT_MIGRATIONS


def register(sub: Any, common: argparse.ArgumentParser) -> None:
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
    mig.add_argument(
        "--tenant",
        metavar="NAME",
        help="the tenant the existing rows become when upgrading a database from before "
        "tenants (default: default)",
    )
    mig.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ember.commands.base import checked_url
    from ember.migrate import MigrationError, describe_difference, function_files, migrate, sql_root
    from ember.migrate import status as migration_status

    url = checked_url()
    root = sql_root()
    if args.status or args.dry_run:
        st = migration_status(url, root)
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
    result = migrate(url, root, tenant=args.tenant)
    applied = ", ".join(result.applied) if result.applied else "none"
    print(f"migrations applied: {applied}")
    print(f"function files re-applied: {len(result.functions)}")
    return 0
