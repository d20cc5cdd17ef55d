"""`ember status` answers "why is nothing happening": each waiting reason in a scenario built to
produce it, the worker's own log of them when idle, and a hot run that missed the cache counted
in the worker's metric and named with its cause."""

from __future__ import annotations

import os
import re
import subprocess
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import anthropic
import psycopg
import pytest
from psycopg.types.json import Jsonb

from ember.host import Host, PrefixCapture, turn_tools
from ember.sim import SimServer
from workerkit import EMBER, WorkerProcess

MODEL = "claude-sonnet-4-6"
USAGE_KEYS = (
    "input_tokens",
    "cache_read_input_tokens",
    "cache_creation_5m_input_tokens",
    "cache_creation_1h_input_tokens",
    "output_tokens",
)


def ember(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": db}
    return subprocess.run([EMBER, *args], env=env, capture_output=True, text=True, timeout=60)


def status_lines(db: str) -> dict[str, str]:
    """{"pipeline reason": the line} from `ember status`."""
    out = ember(db, "status")
    assert out.returncode == 0, out.stderr
    lines = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] in ("shadow", "steward", "workers"):
            lines[f"{parts[0]} {parts[2]}"] = line
    return lines


class At:
    """Host API calls at times relative to one moment, so a scenario can lie in the past."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.t0 = datetime.now(UTC)

    def __call__(self, minutes: float) -> datetime:
        return self.t0 + timedelta(minutes=minutes)

    def thread(self, thread: str, minutes: float, category: str | None = None) -> None:
        self.conn.execute(
            "SELECT ember.create_thread('default', %s, 'side', NULL, %s, 'open', NULL, %s)",
            (thread, category, self(minutes)),
        )

    def row(self, thread: str, text: str, minutes: float) -> None:
        self.conn.execute(
            "SELECT ember.append_message('default', %s, 'user', %s, 'human',"
            " NULL, NULL, NULL, NULL, NULL, %s)",
            (thread, text, self(minutes)),
        )

    def task_ended(self, thread: str, minutes: float) -> None:
        self.conn.execute("SELECT ember.task_ended('default', %s, %s)", (thread, self(minutes)))


def test_ember_status_names_each_reason_work_waits(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        at = At(conn)
        at.thread("early", -70)
        at.row("early", "I prefer tea.", -60)
        before = status_lines(db)
        assert "oldest early" in before["shadow shadow-not-activated"]
        assert "ensure_steward_thread(tenant)" in before["steward steward-thread-missing"]
        assert "no ember worker is connected" in before["workers no-worker"]

        init = ember(db, "init", "--category", "health", "--main", "main", "--main-model", MODEL)
        assert init.returncode == 0, init.stderr
        assert "shadow memory activated" in init.stdout

        # held: claimed by worker w with a lease of an hour.
        at.thread("held", -46)
        at.row("held", "Call me Sam.", -45)
        at.task_ended("held", -45)
        conn.execute("SELECT ember.claim_shadow_run('w', '1 hour', %s)", (at(-44),))
        # flaky: three failed runs in its generation, then a new offer.
        at.thread("flaky", -41)
        at.row("flaky", "I prefer email.", -40)
        for minutes in (-9, -8, -7):
            offer = conn.execute(
                "SELECT ember.shadow_memory_changed('default', 'flaky', 'turn-failed', %s)",
                (at(minutes - 0.5),),
            )
            assert offer.fetchone()
            plan = conn.execute(
                "SELECT ember.claim_shadow_run('w', '5 minutes', %s)", (at(minutes - 0.2),)
            ).fetchone()
            assert plan and plan[0]["thread_id"] == "flaky"
            failed = {
                "status": "failed",
                "error": "boom",
                "usage": dict.fromkeys(USAGE_KEYS, 0),
                "latency_ms": 5,
                "finished_at": at(minutes).isoformat(),
                "proposals": [],
            }
            conn.execute(
                "SELECT ember.submit_shadow_run('default', %s, %s, %s)",
                (plan[0]["run_id"], plan[0]["lease_token"], Jsonb(failed)),
            )
        at.task_ended("flaky", -5)
        # quiet: active a minute ago. due: idle half an hour, not offered yet.
        at.thread("quiet", -2)
        at.row("quiet", "Remember that I am vegetarian.", -1)
        at.thread("due", -40)
        at.row("due", "I live in Porto.", -30)
        # offered: its task ended. busy: a turn is running. care: health, no light model tagged.
        at.thread("offered", -12)
        at.row("offered", "We decided to use Postgres.", -10)
        at.task_ended("offered", -10)
        at.thread("busy", -2)
        conn.execute("SELECT ember.turn_started('default', 'busy', %s)", (at(-1),))
        at.row("busy", "Never deploy on Fridays.", -1)
        at.task_ended("busy", -1)
        at.thread("care", -12, category="health")
        at.row("care", "My knee hurts after running.", -10)
        at.task_ended("care", -10)

    lines = status_lines(db)
    expected = {
        "shadow leased": ("held", "worker w holds the run"),
        "shadow idle-not-reached": ("quiet", "idle less than idle_before_digest (20 minutes)"),
        "shadow tick-due": ("due", "tick() offers it"),
        "shadow ready": ("offered", "cold path, model claude-haiku-4-5"),
        "shadow turn-running": ("busy", "turn_ended()"),
        "shadow model-not-tagged": ("care", "health"),
        "shadow failure-backoff": ("flaky", "3 failed runs in a row"),
        "steward model-not-tagged": ("care", "health"),
        "steward ready": ("early", "read by the next wake"),
        "steward idle-not-reached": ("offered", "idle_before_digest"),
        "workers worker": ("w", "claimed a run at"),
    }
    for key, (thread, words) in expected.items():
        assert key in lines, (key, sorted(lines))
        assert re.search(rf"\b(oldest|worker) {re.escape(thread)}\b", lines[key]), lines[key]
        assert words in lines[key], lines[key]
    assert (
        "until" in lines["shadow idle-not-reached"] and "until" in lines["shadow failure-backoff"]
    )
    assert (
        "shadow shadow-not-activated" not in lines and "steward steward-thread-missing" not in lines
    )


def test_an_idle_worker_says_why_work_waits_once(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT ember.create_thread('default', 'chat', 'side')")
        conn.execute(
            "SELECT ember.append_message('default', 'chat', 'user', 'I prefer tea.', 'human')"
        )
    with SimServer(responder="host") as sim:
        worker = WorkerProcess(
            db, sim.base_url, "--idle-report-after", "0.5", "--poll-interval", "1"
        )
        try:
            worker.ready()
            (shadow,) = worker.wait_for(
                "idle_waiting", lambda e: e.get("reason") == "shadow-not-activated", timeout=30
            )
            (steward,) = worker.wait_for(
                "idle_waiting", lambda e: e.get("reason") == "steward-thread-missing", timeout=30
            )
            assert shadow["pipeline"] == "shadow" and shadow["oldest"] == "chat"
            assert "shadow_activate()" in shadow["msg"]
            assert steward["pipeline"] == "steward"
            # Still idle, still waiting: asked again, not logged again.
            with pytest.raises(AssertionError):
                worker.wait_for(
                    "idle_waiting",
                    lambda e: e.get("reason") == "shadow-not-activated",
                    count=2,
                    timeout=3,
                )
        finally:
            worker.stop()


@pytest.fixture
def host_sim() -> Iterator[SimServer]:
    with SimServer(responder="host") as server:
        yield server


def test_a_hot_run_that_missed_the_cache_is_counted_and_named(db: str, host_sim: SimServer) -> None:
    """A host that opts out of the history breakpoint: the replay reads only its system prompt
    from the cache, and the worker's metric and `ember status` say so, with the cause."""
    capture = PrefixCapture(mark_history=False)
    client = anthropic.Anthropic(
        base_url=host_sim.base_url, api_key="k", max_retries=0, http_client=capture.http_client()
    )
    system = [{"type": "text", "text": "You keep notes for a runner. " * 200,
               "cache_control": {"type": "ephemeral"}}]  # fmt: skip
    with psycopg.connect(db, autocommit=True) as conn:
        host = Host(conn)
        host.setup(main="main", main_model=MODEL)
        host.create_thread("run", "side", model=MODEL)
        history: list[dict[str, Any]] = []
        for said in ("I run every morning before work. " * 60, "I prefer trails to roads. " * 60):
            host.append_message("run", "user", said, author="human")
            history.append({"role": "user", "content": said})
            reply = client.messages.create(
                model=MODEL, max_tokens=256, system=system, tools=turn_tools([]), messages=history  # type: ignore[arg-type]
            )  # fmt: skip
            blocks = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
            history.append({"role": "assistant", "content": blocks})
            host.append_message("run", "assistant", "noted", blocks=blocks)
            host.note_prefix("run", capture.take())
        host.waiting_for_user("run")

    worker = WorkerProcess(db, host_sim.base_url, "--pipelines", "shadow", "--metrics-port", "0")
    try:
        (metrics,) = worker.wait_for("metrics", timeout=90)
        worker.ready()
        (warned,) = worker.wait_for("hot_cache_shortfall", timeout=30)
        assert warned["cause"] == "no-breakpoint" and warned["share"] < 0.9
        url = f"http://127.0.0.1:{metrics['port']}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
        counter = (
            "ember_worker_hot_cache_shortfalls_total"
            '{cause="no-breakpoint",model="claude-sonnet-4-6"} 1.0'
        )
        assert counter in text
    finally:
        worker.stop()
    line = status_lines(db)["shadow hot-cache-shortfall"]
    assert "oldest run" in line and "no cache breakpoint on its last message" in line
