"""What every command shares: exit codes, the one-line failure, the checked database URL, and
output files that never hold half a result.

Nothing here imports psycopg at module level: `ember --help` must start at once.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ember.tenants import DEFAULT_TENANT

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
EXIT_NOT_FOUND = 11
EXIT_SERVER_DIED = 12

EXIT_CODES = """exit codes:
  0  success
  1  unexpected error (a bug: rerun with --debug for the traceback)
  2  usage error: a bad flag, a missing or unwritable file, a missing ANTHROPIC_API_KEY
  3  the embedded server is not running (ember db start)
  4  the database cannot be reached
  5  authentication to the database failed
  6  malformed DATABASE_URL
  7  the database's migrations do not match this ember, or it is not migrated (ember migrate)
  8  the embedded server or the test tools could not be set up
  9  refused (e.g. a test database name that is not clearly a test database)
 10  the command ran but rejected part of its work (import lines, judge groups): see stderr
 11  no such item (an unknown fact or thread id)
 12  the database server terminated while the command ran (see its log)
"""


class CliError(Exception):
    """An expected failure: one line for the user and the exit code that names its kind."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class ArgumentParser(argparse.ArgumentParser):
    """A subcommand's parser that reports an unknown flag itself, with its own usage.

    argparse hands a subcommand's unrecognised arguments back to the top-level parser, which
    then prints the top-level usage: `ember worker --concurency 8` would not say which flags
    `worker` has.
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def add_tenant_argument(parser: Any, whose: str) -> None:
    """`--tenant TENANT`: whose data the command reads or changes (docs/tenants.md)."""
    parser.add_argument(
        "--tenant",
        default=DEFAULT_TENANT,
        metavar="TENANT",
        help=f"{whose} (default: {DEFAULT_TENANT})",
    )


def checked_url() -> str:
    """`DATABASE_URL` (parsed, so a malformed one is exit 6) or the embedded server's."""
    from ember.config import database_url, uses_embedded

    if uses_embedded():
        return database_url()
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

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


def migrated_url() -> str:
    """The checked URL of a database this ember has migrated; exit 7 otherwise, before the
    command reads or writes anything."""
    from ember.migrate import check_schema_current

    url = checked_url()
    difference = check_schema_current(url)
    if difference is not None:
        raise CliError(EXIT_MIGRATIONS, difference)
    return url


def where(url: str) -> str:
    """host:port/db of a URL, never its password."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the configured database"
    host = params.get("host") or "the local socket"
    port = f":{params['port']}" if params.get("port") else ""
    return f"{host}{port}/{params.get('dbname') or ''}"


def readable_file(path: str) -> Path:
    """A file the command will read: exit 2 naming it when it is missing or unreadable."""
    p = Path(path)
    if not p.is_file():
        what = "is a directory" if p.is_dir() else "does not exist"
        raise CliError(EXIT_USAGE, f"{path} {what}")
    if not os.access(p, os.R_OK):
        raise CliError(EXIT_USAGE, f"{path} is not readable")
    return p


def writable_target(path: str) -> Path:
    """A file the command will write: exit 2 naming it when its directory is missing or not
    writable, checked before any work is done."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise CliError(EXIT_USAGE, f"{path} is a directory")
    if not parent.is_dir():
        raise CliError(EXIT_USAGE, f"cannot write {path}: {parent} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise CliError(EXIT_USAGE, f"cannot write {path}: permission denied")
    return p


@contextlib.contextmanager
def output(path: str, *, text: bool = True) -> Iterator[IO[Any]]:
    """Standard output for "-", else a file that appears whole or not at all: written beside
    its target and renamed over it only when the command succeeds, so a failure halfway never
    leaves a file that looks like a complete (say, empty) export."""
    if path == "-":
        yield sys.stdout
        return
    target = writable_target(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    try:
        mode = "w" if text else "wb"
        kwargs: dict[str, Any] = {"encoding": "utf-8", "newline": "\n"} if text else {}
        with os.fdopen(fd, mode, **kwargs) as out:
            yield out
        os.chmod(tmp, 0o644 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def one_line(message: str) -> str:
    """A multi-line message (e.g. a server log tail) folded onto one line, never dropped."""
    return " | ".join(part.strip() for part in message.strip().splitlines() if part.strip())
