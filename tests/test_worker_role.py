"""The worker as the role docs/operations.md prescribes: `ember worker` logged in as
ember_worker, which holds no table privilege, runs every pipeline (hot and cold shadow runs,
the steward) through granted functions and its claim plans alone."""

from __future__ import annotations

import time
from collections.abc import Iterator

import anthropic
import psycopg
import pytest

from ember.host import PrefixCapture, turn_tools
from ember.sim import Reply, Scripted, SimServer
from ember.tools import SHADOW_TOOL_NAME
from reliability import record
from simfixtures import words
from workerkit import API_KEY, WorkerProcess, as_role, host_on, prepare, runs

CC = {"type": "ephemeral"}
SYSTEM = "You are a careful assistant. " + words("system", 2400)


@pytest.fixture
def rsim() -> Iterator[SimServer]:
    with SimServer(responder=Scripted()) as server:
        yield server


def _hot_turn(url: str, sim: SimServer) -> int:
    """One real host turn on t1 with its prefix recorded, so the next shadow run is hot."""
    with host_on(url) as host:
        said = "From now on I prefer answers in metric units. " + words("ctx", 200)
        mid = host.append_message("t1", "user", said, author="human")
        capture = PrefixCapture()
        client = anthropic.Anthropic(
            base_url=sim.base_url, api_key=API_KEY, max_retries=0, http_client=capture.http_client()
        )
        sim.state.responder.push(Reply.text("Noted."))  # type: ignore[attr-defined]
        message = client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=1024,
            system=[{"type": "text", "text": SYSTEM, "cache_control": CC}],
            tools=turn_tools([]),  # type: ignore[arg-type]
            messages=[
                {"role": "user", "content": [{"type": "text", "text": said, "cache_control": CC}]}
            ],
        )
        host.append_message(
            "t1", "assistant", "".join(b.text for b in message.content if b.type == "text")
        )
        assert host.note_prefix("t1", capture.take())
        host.waiting_for_user("t1")
    return mid


def test_the_worker_role_reads_no_table(db: str) -> None:
    with psycopg.connect(as_role(db), autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("ember_worker",)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT id FROM ember.models")


def test_a_hot_run_completes_under_the_worker_role(db: str, rsim: SimServer) -> None:
    prepare(db, ["t1"])
    mid = _hot_turn(db, rsim)
    rsim.state.responder.push(  # type: ignore[attr-defined]
        Reply.tool_use(
            SHADOW_TOOL_NAME,
            {
                "facts": [
                    {
                        "text": "The user prefers metric units.",
                        "evidence_kind": "user-stated",
                        "evidence": [{"message_id": mid}],
                    }
                ]
            },
        )
    )
    w = WorkerProcess(db, rsim.base_url, "--pipelines", "shadow").ready()
    try:
        (done,) = w.wait_for("run_finished", timeout=60)
        assert (done["status"], done["path"], done["error"]) == ("completed", "hot", None)
        assert "InsufficientPrivilege" not in w.output and "permission denied" not in w.output
    finally:
        assert w.stop() == 0
    (run,) = runs(db)
    assert (run["status"], run["path"]) == ("completed", "hot")
    record(
        "role-hot",
        "`ember worker` logged in as ember_worker replays a recorded turn on the hot path",
        1,
        "0 runs failed for a privilege",
        "tests/test_worker_role.py",
    )


def test_a_steward_call_in_flight_is_aborted_when_a_thread_it_read_is_sealed(db: str) -> None:
    with host_on(db) as host:
        host.create_thread("main", "main")
        host.conn.execute("SELECT ember.set_thread_model('default', 'main', 'claude-haiku-4-5')")
        host.conn.execute("SELECT ember.ensure_steward_thread('default')")
        host.conn.execute(
            "UPDATE ember.settings SET value = '\"0 seconds\"' WHERE key = 'idle_before_digest'"
        )
        host.create_thread("diary", "side")
        host.append_message("diary", "user", "My diagnosis came back today.", author="human")
        host.task_ended("diary")
    with SimServer(responder="hang") as sim:
        w = WorkerProcess(db, sim.base_url, "--pipelines", "steward").ready()
        try:
            sim.wait_for_requests(1, timeout=60)
            t0 = time.monotonic()
            with host_on(db) as host:
                assert host.seal_thread("diary")
            aborted = sim.wait_for_requests(1, timeout=5, predicate=lambda e: e.disconnected)
            assert aborted, "the call holding the sealed rows was not aborted"
            assert time.monotonic() - t0 < 5
            (done,) = w.wait_for("run_finished", timeout=30)
            assert done["status"] == "failed"
        finally:
            assert w.stop() == 0
    with psycopg.connect(db, autocommit=True) as conn:
        row = conn.execute("SELECT status, error FROM ember.steward_runs").fetchone()
    assert row == ("failed", "thread-isolated: a thread this run read was sealed")
    assert len(sim.requests) == 1, "no further call was made with the sealed rows"
    record(
        "seal-steward",
        "seal_thread on the thread a hanging steward call read: the call aborted within 5 s,"
        " the run failed thread-isolated",
        1,
        "0 further calls with the sealed rows",
        "tests/test_worker_role.py",
    )
