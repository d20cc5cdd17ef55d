"""The `ember` command line.

Each command lives in its own module of `ember.commands`; building the parser imports only
those modules, so `ember --help` starts at once and a command imports what it uses when it
runs. Every expected failure is one line on stderr and an exit code from the table below
(ember.commands.base.EXIT_CODES, also in `ember --help`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Callable, Sequence

from ember.commands import MODULES
from ember.commands.base import (
    EXIT_AUTH,
    EXIT_BAD_URL,
    EXIT_CODES,
    EXIT_MIGRATIONS,
    EXIT_NOT_FOUND,
    EXIT_NOT_RUNNING,
    EXIT_REFUSED,
    EXIT_REJECTED,
    EXIT_SERVER_DIED,
    EXIT_SETUP,
    EXIT_UNEXPECTED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    ArgumentParser,
    CliError,
    one_line,
)

__all__ = [
    "EXIT_AUTH",
    "EXIT_BAD_URL",
    "EXIT_MIGRATIONS",
    "EXIT_NOT_FOUND",
    "EXIT_NOT_RUNNING",
    "EXIT_REFUSED",
    "EXIT_REJECTED",
    "EXIT_SERVER_DIED",
    "EXIT_SETUP",
    "EXIT_UNEXPECTED",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "CliError",
    "build_parser",
    "main",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ember",
        description="Ember: long-term memory for an agent runtime whose conversations live in "
        "PostgreSQL.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="show a traceback on any failure")
    # Also accepted after the subcommand; SUPPRESS keeps a subparser from resetting it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=ArgumentParser)
    for name in MODULES:
        importlib.import_module(f"ember.commands.{name}").register(sub, common)
    sub.add_parser("sim", help="the local Messages API simulator (see docs/sim.md)", add_help=False)
    return parser


def _classify(exc: BaseException) -> CliError | None:
    """The expected failures, each with its exit code; None for a bug.

    The modules an exception can come from are loaded by then, so looking them up in
    sys.modules costs nothing and imports nothing.
    """
    if isinstance(exc, CliError):
        return exc
    from ember.servererror import server_terminated, terminated_message

    if server_terminated(exc):
        return CliError(EXIT_SERVER_DIED, terminated_message())
    embedded = sys.modules.get("ember.embedded")
    if embedded is not None:
        if isinstance(exc, embedded.NotRunningError):
            return CliError(EXIT_NOT_RUNNING, str(exc))
        if isinstance(exc, embedded.EmbeddedError):
            return CliError(EXIT_SETUP, str(exc))
    devsetup = sys.modules.get("ember.devsetup")
    if devsetup is not None:
        if isinstance(exc, devsetup.SetupError):
            return CliError(EXIT_SETUP, str(exc))
        if isinstance(exc, devsetup.RefusedError):
            return CliError(EXIT_REFUSED, str(exc))
    migrate = sys.modules.get("ember.migrate")
    if migrate is not None and isinstance(exc, migrate.MigrationError):
        return CliError(EXIT_MIGRATIONS, str(exc))
    modelaccess = sys.modules.get("ember.modelaccess")
    if modelaccess is not None and isinstance(exc, modelaccess.ConfigError):
        return CliError(EXIT_USAGE, str(exc))
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None:
        if isinstance(exc, psycopg.errors.InvalidSchemaName | psycopg.errors.UndefinedFunction):
            # A database someone dropped or half-migrated between the check and the query.
            return CliError(
                EXIT_MIGRATIONS,
                f"the database is not migrated for this ember ({exc.diag.message_primary}); "
                "run `ember migrate`",
            )
        if isinstance(exc, psycopg.OperationalError):
            from ember.connerror import connection_error

            code, message = connection_error(exc)
            return CliError(code, message)
    if isinstance(exc, OSError) and exc.filename is not None:
        return CliError(EXIT_USAGE, f"{exc.filename}: {exc.strerror or exc}")
    return None


def _fail(command: str, code: int, message: str) -> int:
    print(f"ember {command}: {one_line(message)}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sim"]:
        from ember.sim.server import main as sim_main

        return sim_main(argv[1:])
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    debug = bool(getattr(args, "debug", False))
    try:
        return int(run(args))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if debug:
            traceback.print_exc()
        known = _classify(exc)
        if known is not None:
            return _fail(args.command, known.code, str(known))
        hint = "" if debug else " (rerun with --debug for the traceback)"
        return _fail(
            args.command, EXIT_UNEXPECTED, f"unexpected error: {type(exc).__name__}: {exc}{hint}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
