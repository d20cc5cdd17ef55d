"""Telling a database server that died from one that cannot be reached or refuses a login.

When PostgreSQL crashes (a backend killed by a signal takes every session down with it) or is
shut down, a client sees one of a few errors: the server's own "terminating connection"
(SQLSTATE 57P01 administrator command, 57P02 crash of another process, 57P03 cannot connect
now: starting up, in recovery, shutting down) or libpq's "server closed the connection
unexpectedly". Each says the server went away, not that the URL is wrong, so a command says so
and names the server log where there is one.
"""

from __future__ import annotations

import re

# 57P02: another server process crashed; 57P03: starting up, in recovery, shutting down.
CRASHED_SQLSTATES = frozenset({"57P02", "57P03"})
# 57P01: a fast shutdown, but also pg_terminate_backend() of this one session.
ADMIN_SHUTDOWN = "57P01"
_CRASHED_TEXT = re.compile(
    r"terminating connection because of crash|"
    r"the database system is (?:in recovery mode|starting up|shutting down|not yet accepting)",
    re.IGNORECASE,
)
# libpq's words for a connection whose server end went away without a word: a crash (every
# session of the server), or this one session's backend ended.
_CLOSED_TEXT = re.compile(r"server closed the connection unexpectedly", re.IGNORECASE)


def server_terminated(exc: BaseException, *, connection_loss: bool = True) -> bool:
    """Whether `exc` (or what caused it) says the database server terminated or restarts.

    With `connection_loss` false, only what names the server as a whole counts (a crash, a
    recovery, a shutdown in progress); a connection closed under one session, or ended by an
    administrator (57P01, which is also what pg_terminate_backend() sends), does not: a
    long-running client reconnects that one and finds out from the server itself.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        state = getattr(current, "sqlstate", None)
        text = str(current)
        if state in CRASHED_SQLSTATES or _CRASHED_TEXT.search(text):
            return True
        if connection_loss and (state == ADMIN_SHUTDOWN or _CLOSED_TEXT.search(text)):
            return True
        current = current.__cause__ or current.__context__
    return False


def terminated_message(url_is_embedded: bool | None = None) -> str:
    """One line: the server terminated, and where its log is for the embedded one."""
    from ember.config import uses_embedded

    embedded = uses_embedded() if url_is_embedded is None else url_is_embedded
    if embedded:
        from ember.embedded import EmbeddedServer

        log = EmbeddedServer().layout.log
        return (
            f"the embedded database server terminated (a crash, a restart or a stop); its log "
            f"is {log}; if it is not running, `ember db start` starts it"
        )
    return (
        "the database server terminated (crashed, restarted or was shut down) while the "
        "command ran; see the server's log"
    )
