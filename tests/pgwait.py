"""Waiting on another session, without sleeping a fixed time."""

from __future__ import annotations

import time

import psycopg


def blocked_on_lock(url: str, application_name: str, timeout: float = 10.0) -> bool:
    """True once the session named `application_name` waits on a lock; False after `timeout`."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as watcher:
        while time.monotonic() < deadline:
            row = watcher.execute(
                "SELECT wait_event_type FROM pg_stat_activity WHERE application_name = %s",
                (application_name,),
            ).fetchone()
            if row and row[0] == "Lock":
                return True
            time.sleep(0.02)
    return False
