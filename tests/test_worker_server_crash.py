"""`ember worker` when the database server crashes under it: one line, then back to work.

A backend killed with SIGKILL makes PostgreSQL end every session and restart; the worker's
connections all fail at once. It says so once (not a warning per connection, never a
traceback), reconnects on its own, and the next offer is done as usual.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from ember.embedded import EmbeddedServer
from ember.migrate import migrate
from ember.sim import SimServer
from test_cli import ROOT
from workerkit import WorkerProcess, offer_cold, prepare


@pytest.fixture
def crash_db() -> Iterator[tuple[EmbeddedServer, str]]:
    # Under a directory the server's user may pass (mkdtemp in /tmp, 0711): PostgreSQL checks
    # its data directory by path when it re-initialises after a crash, which a 0700 parent
    # (pytest's own temporary root, when run as root) would refuse (docs/operations.md).
    root = Path(tempfile.mkdtemp(prefix="ember-crash-"))
    root.chmod(0o711)
    server = EmbeddedServer(root)
    url = server.start()
    migrate(url, ROOT)
    yield server, url
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


def test_a_server_crash_is_one_line_and_the_worker_carries_on(
    crash_db: tuple[EmbeddedServer, str],
) -> None:
    server, url = crash_db
    prepare(url, ["t1", "t2"])
    with SimServer(responder="heuristic") as sim:
        w = WorkerProcess(url, sim.base_url, "--poll-interval", "1", "--tick-interval", "1")
        try:
            w.ready()
            offer_cold(url, "t1", "I prefer tea.")
            w.wait_for("run_finished", timeout=60)
            with psycopg.connect(url, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'ember-worker%'"
                    " LIMIT 1"
                ).fetchone()
            assert row is not None
            os.kill(int(row[0]), signal.SIGKILL)
            (down,) = w.wait_for("db_terminated", timeout=60)
            assert "terminated" in down["msg"]
            w.wait_for("listening", count=2, timeout=60)
            offer_cold(url, "t2", "I prefer green tea.")
            w.wait_for("run_finished", count=2, timeout=60)
            assert w.stop() == 0
        finally:
            if w.proc.poll() is None:
                w.kill()
    terminated = [e for e in w.events if e.get("event") == "db_terminated"]
    assert len(terminated) == 1, "\n".join(f"{e.get('event')}: {e.get('msg')}" for e in w.events)
    assert "Traceback" not in w.output
    assert not [e for e in w.events if e.get("event") == "run_error"]
    assert "terminated" in server.layout.log.read_text(errors="replace")
