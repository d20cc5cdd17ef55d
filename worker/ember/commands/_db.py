"""What the operator's commands (init, status, settings, forget, search) share: a connection to
the checked, migrated database, with Ember's refusals turned into one-line errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ember.commands.base import EXIT_REFUSED, CliError


def refusal(exc: Any) -> CliError | None:
    """A refusal of Ember's SQL (SQLSTATE class EM) as a refused error (exit 9), naming its
    SQLSTATE and hint; None for any other error."""
    if not (getattr(exc, "sqlstate", None) or "").startswith("EM"):
        return None
    message = exc.diag.message_primary or str(exc)
    hint = exc.diag.message_hint
    return CliError(EXIT_REFUSED, f"{message} [{exc.sqlstate}]" + (f" ({hint})" if hint else ""))


@contextmanager
def connect(*, autocommit: bool = True) -> Iterator[Any]:
    """A psycopg connection to DATABASE_URL (checked and migrated, else exits 6 or 7) or the
    embedded server; an Ember refusal inside the block is raised as CliError."""
    import psycopg

    from ember.commands.base import migrated_url

    url = migrated_url()
    try:
        with psycopg.connect(url, autocommit=autocommit) as conn:
            yield conn
    except psycopg.Error as exc:
        refused = refusal(exc)
        if refused is None:
            raise
        raise refused from exc
