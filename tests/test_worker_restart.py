"""A PostgreSQL restart while a model call is in flight loses nothing: the answer that arrives
after the restart is submitted on a fresh connection, never dropped on a stale pooled one."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.embedded import EmbeddedServer
from ember.migrate import migrate
from ember.sim import Reply, Scripted, SimServer
from ember.tools import SHADOW_TOOL_NAME
from reliability import record
from test_cli import ROOT
from workerkit import WorkerProcess, offer_cold, prepare, proposals, runs


@pytest.fixture
def restart_db() -> Iterator[tuple[EmbeddedServer, str]]:
    root = Path(tempfile.mkdtemp(prefix="ember-restart-"))
    root.chmod(0o711)
    server = EmbeddedServer(root)
    url = server.start()
    migrate(url, ROOT)
    yield server, url
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


def _fact(text: str) -> Reply:
    return Reply.tool_use(
        SHADOW_TOOL_NAME,
        {"facts": [{"text": text, "evidence_kind": "user-stated", "evidence": []}]},
    )


def test_an_answer_received_after_a_restart_is_submitted(
    restart_db: tuple[EmbeddedServer, str],
) -> None:
    server, url = restart_db
    prepare(url, ["t0", "t1"])
    gate = threading.Event()

    def held(_: Any) -> Reply:
        gate.wait(60)
        return Reply.tool_use(SHADOW_TOOL_NAME, {"facts": []})

    with SimServer(
        responder=Scripted([lambda _: Reply.tool_use(SHADOW_TOOL_NAME, {"facts": []}), held])
    ) as sim:
        w = WorkerProcess(url, sim.base_url, "--concurrency", "2", "--tick-interval", "1")
        try:
            w.ready()
            # A first run leaves connections idle in the worker's pool.
            offer_cold(url, "t0", "I prefer tea.")
            w.wait_for("run_finished", timeout=60)
            offer_cold(url, "t1", "I prefer green tea.")
            sim.wait_for_requests(2, timeout=30)
            server.stop()
            server.start()
            gate.set()
            (done,) = w.wait_for(
                "run_finished", lambda e: e.get("status") != "lost", count=2, timeout=90
            )[1:]
            assert done["status"] == "completed", w.output[-3000:]
            assert w.stop() == 0
        finally:
            gate.set()
            if w.proc.poll() is None:
                w.kill()
        assert len(sim.requests) == 2, "the paid answer was not asked for again"
    statuses = [(r["thread_id"], r["status"]) for r in runs(url)]
    assert sorted(statuses) == [("t0", "completed"), ("t1", "completed")], statuses
    assert proposals(url) == []
    assert "Traceback" not in w.output
    record(
        "pg-restart-call",
        "PostgreSQL stopped and started while a call was out, with pooled connections idle",
        1,
        "0 answers dropped; 0 repeated calls",
        "tests/test_worker_restart.py",
    )


def test_an_answer_that_arrives_while_the_server_is_down_waits_for_it(
    restart_db: tuple[EmbeddedServer, str],
) -> None:
    server, url = restart_db
    prepare(url, ["t1"])
    gate = threading.Event()

    def held(_: Any) -> Reply:
        gate.wait(60)
        return Reply.tool_use(SHADOW_TOOL_NAME, {"facts": []})

    with SimServer(responder=Scripted([held])) as sim:
        w = WorkerProcess(url, sim.base_url, "--tick-interval", "1")
        try:
            w.ready()
            offer_cold(url, "t1", "I prefer green tea.")
            sim.wait_for_requests(1, timeout=30)
            server.stop()
            gate.set()  # the paid answer arrives while the server is down
            w.wait_for("submit_retry", timeout=60)
            server.start()
            (done,) = w.wait_for("run_finished", timeout=90)
            assert done["status"] == "completed", w.output[-3000:]
            assert w.stop() == 0
        finally:
            gate.set()
            if w.proc.poll() is None:
                w.kill()
        assert len(sim.requests) == 1, "the paid answer was not asked for again"
    assert [(r["thread_id"], r["status"]) for r in runs(url)] == [("t1", "completed")]
    assert "Traceback" not in w.output
    record(
        "pg-down-answer",
        "the paid answer arrived while PostgreSQL was down; the submit retried until it was back",
        1,
        "0 answers dropped; 0 repeated calls",
        "tests/test_worker_restart.py",
    )
