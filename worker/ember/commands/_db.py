"""What the commands share: the checked database URL, and Ember's refusals as one-line errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg


def is_refusal(exc: psycopg.Error) -> bool:
    return (exc.sqlstate or "").startswith("EM")


def refusal(exc: psycopg.Error) -> Exception:
    """A refusal of Ember's SQL (SQLSTATE class EM) as the CLI's refused error (exit 9)."""
    from ember.cli import EXIT_REFUSED, CliError

    message = exc.diag.message_primary or str(exc)
    hint = exc.diag.message_hint
    return CliError(EXIT_REFUSED, f"{message} [{exc.sqlstate}]" + (f" ({hint})" if hint else ""))


@contextmanager
def connect(*, autocommit: bool = True) -> Iterator[psycopg.Connection[Any]]:
    """A connection to DATABASE_URL (checked) or the embedded server; Ember's refusals raised
    as CliError so the command exits with its one-line message."""
    from ember.cli import _checked_url

    try:
        with psycopg.connect(_checked_url(), autocommit=autocommit) as conn:
            yield conn
    except psycopg.Error as exc:
        if is_refusal(exc):
            raise refusal(exc) from exc
        raise
