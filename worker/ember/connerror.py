"""A failed connection to PostgreSQL, named by its kind: authentication, a malformed URL, or a
server that cannot be reached (a server that died while a command ran is ember.servererror)."""

from __future__ import annotations

import re

import psycopg

from ember.commands.base import EXIT_AUTH, EXIT_BAD_URL, EXIT_UNREACHABLE, where
from ember.config import database_url, uses_embedded

_AUTH = re.compile(
    r"password authentication failed|no password supplied|authentication failed|"
    r"role \S+ does not exist|pg_hba\.conf rejects",
    re.IGNORECASE,
)


def connection_error(exc: psycopg.OperationalError) -> tuple[int, str]:
    """(exit code, one line) for a connection that failed."""
    detail = " ".join(str(exc).split())
    detail = re.sub(r"^connection failed: ", "", detail)
    embedded = uses_embedded()
    target = "the embedded server" if embedded else where(database_url())
    if _AUTH.search(detail):
        return (
            EXIT_AUTH,
            f"authentication to {target} failed ({detail}); check the user and password in "
            "DATABASE_URL (or its passfile)",
        )
    if "invalid" in detail and "connection is bad" in detail:
        return EXIT_BAD_URL, f"DATABASE_URL is malformed ({detail})"
    hint = "is it running? (ember db status)" if embedded else "is it up, is DATABASE_URL right?"
    return EXIT_UNREACHABLE, f"cannot reach {target} ({detail}); {hint}"
