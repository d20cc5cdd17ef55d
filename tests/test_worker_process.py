"""`ember worker` as a real process: NOTIFY wake-ups, cancellation, kill -9 and restart, two
workers side by side, SIGTERM with calls in flight, startup errors, metrics and logs.

Every wait is on an event (a log line of the worker, a request arriving at the simulator, a
process exit) with a timeout; nothing sleeps a fixed time hoping something happened.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from ember.sim import Hang, Reply, Scripted, SimServer
from ember.tools import SHADOW_TOOL_NAME
from workerkit import (
    API_KEY,
    EMBER,
    WorkerProcess,
    host_on,
    offer_cold,
    prepare,
    proposals,
    runs,
    wait_all,
)


@pytest.fixture(scope="module")
def wsim() -> Iterator[SimServer]:
    with SimServer(responder="heuristic") as server:
        yield server


@pytest.fixture
def workers(wsim: SimServer) -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for w in started:
        if w.proc.poll() is None:
            w.kill()
        # Whatever happened, the API key never reached a log line.
        assert API_KEY not in w.output


def _start(
    workers: list[WorkerProcess], url: str, sim: SimServer, *args: str, name: str = "w1"
) -> WorkerProcess:
    w = WorkerProcess(url, sim.base_url, *args, name=name)
    workers.append(w)
    return w.ready()


def test_notify_wakes_the_worker_well_under_a_second(
    db: str, wsim: SimServer, workers: list[WorkerProcess]
) -> None:
    wsim.reset(responder="heuristic")
    prepare(db, ["t1"])
    w = _start(workers, db, wsim, "--poll-interval", "60")
    t0 = time.monotonic()
    offer_cold(db, "t1", "I prefer tea.")  # commits: NOTIFY ember_wake
    (claimed,) = w.wait_for("claimed", timeout=5)
    assert claimed["_at"] - t0 < 0.5
    (done,) = w.wait_for("run_finished")
    assert done["status"] == "completed" and done["proposals"] == 1
    assert w.stop() == 0


def test_a_human_message_aborts_the_call_at_once(
    db: str, wsim: SimServer, workers: list[WorkerProcess]
) -> None:
    wsim.reset(responder="hang")
    prepare(db, ["t1"])
    w = _start(workers, db, wsim)
    offer_cold(db, "t1", "The build passed on main.", human=False)
    wsim.wait_for_requests(1, timeout=10)
    t0 = time.monotonic()
    with host_on(db) as host:
        host.append_message("t1", "user", "Stop, I changed my mind.", author="human")
    aborted = wsim.wait_for_requests(1, timeout=1.0, predicate=lambda e: e.disconnected)
    assert aborted and time.monotonic() - t0 < 1.0
    (done,) = w.wait_for("run_finished")
    assert done["status"] == "cancelled"
    (run,) = runs(db)
    assert (run["status"], run["error"]) == ("cancelled", "interrupted-by-user")
    assert proposals(db) == []
    assert w.stop() == 0


def test_a_forged_cancel_is_checked_in_sql_and_ignored(
    db: str, wsim: SimServer, workers: list[WorkerProcess]
) -> None:
    gate = threading.Event()

    def held(_: Any) -> Reply:
        gate.wait(10)
        return Reply.tool_use(SHADOW_TOOL_NAME, {"facts": []})

    wsim.reset(responder=Scripted([held]))
    prepare(db, ["t1"])
    w = _start(workers, db, wsim)
    offer_cold(db, "t1", "The build passed on main.", human=False)
    wsim.wait_for_requests(1, timeout=10)
    (run,) = runs(db)
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT pg_notify('ember_cancel', %s)", (str(run["id"]),))
        # A marker notification sent after the forged one: once the worker has seen it, it has
        # seen (and checked) the forged cancel too.
        conn.execute("SELECT ember.create_thread('default', 't2', 'side')")
        conn.execute("SELECT ember.append_message('default', 't2', 'assistant', 'done')")
        conn.execute("SELECT ember.task_ended('default', 't2')")
    w.wait_for("claimed", lambda e: e["thread_id"] == "t2")
    gate.set()
    done = w.wait_for("run_finished", lambda e: e["thread_id"] == "t1")
    assert done[0]["status"] == "completed"
    assert not [e for e in w.events if e.get("event") == "cancel"]
    assert w.stop() == 0


def test_kill_9_mid_run_then_restart_does_the_thread_exactly_once(
    db: str, wsim: SimServer, workers: list[WorkerProcess]
) -> None:
    wsim.reset(responder=Scripted([Hang()]))
    prepare(db, ["t1"])
    mid = offer_cold(db, "t1", "I prefer tea.")
    a = _start(workers, db, wsim, "--lease", "1.5", name="a")
    wsim.wait_for_requests(1, timeout=10)
    a.kill()
    wsim.reset(responder="heuristic")
    b = _start(workers, db, wsim, "--lease", "1.5", "--tick-interval", "0.3", name="b")
    (done,) = b.wait_for("run_finished", timeout=20)
    assert done["status"] == "completed"
    first, second = runs(db)
    assert (first["worker"], first["status"], first["error"]) == ("a", "abandoned", "lease expired")
    assert (second["worker"], second["status"]) == ("b", "completed")
    stored = proposals(db)
    assert [(p["run_id"], p["evidence"]) for p in stored] == [(second["id"], [{"message_id": mid}])]
    assert b.stop() == 0


def test_two_workers_never_process_the_same_thread(
    db: str, wsim: SimServer, workers: list[WorkerProcess]
) -> None:
    wsim.reset(responder="latency:0.05")
    threads = [f"t{i}" for i in range(16)]
    prepare(db, threads)
    shared = threading.Condition()
    a = WorkerProcess(db, wsim.base_url, "--concurrency", "4", name="a", cond=shared)
    b = WorkerProcess(db, wsim.base_url, "--concurrency", "4", name="b", cond=shared)
    workers.extend([a, b])
    a.ready()
    b.ready()
    for rnd in range(2):
        for t in threads:
            offer_cold(db, t, f"I prefer tea, round {rnd}.")
        wait_all([a, b], "run_finished", len(threads) * (rnd + 1))
    all_runs = runs(db)
    assert len(all_runs) == 32 and all(r["status"] == "completed" for r in all_runs)
    assert {r["worker"] for r in all_runs} == {"a", "b"}
    with psycopg.connect(db, autocommit=True) as conn:
        overlaps = conn.execute(
            "SELECT count(*) FROM ember.shadow_runs AS x JOIN ember.shadow_runs AS y"
            " ON x.thread_id = y.thread_id AND x.id < y.id"
            " AND tstzrange(x.started_at, x.finished_at) && tstzrange(y.started_at, y.finished_at)"
        ).fetchone()
    assert overlaps == (0,)
    assert a.stop() == 0 and b.stop() == 0


def test_sigterm_finishes_calls_in_flight_and_releases_the_rest(
    db: str, wsim: SimServer, workers: list[WorkerProcess]
) -> None:
    gate = threading.Event()

    def slow(_: Any) -> Reply:
        gate.wait(10)
        return Reply.tool_use(SHADOW_TOOL_NAME, {"facts": []})

    # Two calls finish within the grace period once released; two hang past it.
    wsim.reset(responder=Scripted([slow, slow, Hang(), Hang()]))
    prepare(db, ["t1", "t2", "t3", "t4"])
    w = _start(workers, db, wsim, "--concurrency", "4", "--grace", "1.5")
    for t in ("t1", "t2", "t3", "t4"):
        offer_cold(db, t, "The deploy succeeded.", human=False)
    wsim.wait_for_requests(4, timeout=10)
    w.signal(signal.SIGTERM)
    w.wait_for("stopping")
    gate.set()
    assert w.proc.wait(15) == 0
    by_status: dict[str, list[str]] = {}
    for r in runs(db):
        by_status.setdefault(r["status"], []).append(r["thread_id"])
    assert len(by_status["completed"]) == 2 and len(by_status["abandoned"]) == 2
    released = by_status["abandoned"]
    with psycopg.connect(db, autocommit=True) as conn:
        errors = conn.execute(
            "SELECT DISTINCT error FROM ember.shadow_runs WHERE status = 'abandoned'"
        ).fetchall()
        ready = conn.execute(
            "SELECT array_agg(thread_id ORDER BY thread_id) FROM ember.shadow_ready()"
            " WHERE model IS NOT NULL"
        ).fetchone()
    assert errors == [("released",)]
    # Offered again at once, not a lease length later.
    assert ready == (sorted(released),)
    wsim.reset(responder="heuristic")
    again = _start(workers, db, wsim, name="again")
    again.wait_for("run_finished", count=2)
    assert again.stop() == 0
    finished = [r for r in runs(db) if r["status"] == "completed"]
    assert sorted(r["thread_id"] for r in finished) == ["t1", "t2", "t3", "t4"]


def test_the_listen_connection_comes_back_after_it_is_cut(
    db: str, wsim: SimServer, workers: list[WorkerProcess]
) -> None:
    wsim.reset(responder="heuristic")
    prepare(db, ["t1"])
    w = _start(workers, db, wsim, "--poll-interval", "60")
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = 'ember-worker:w1:listen'"
        )
    w.wait_for("listen_lost")
    w.wait_for("listening", count=2)  # LISTEN issued again on a new connection
    t0 = time.monotonic()
    offer_cold(db, "t1", "I prefer tea.")
    (claimed,) = w.wait_for("claimed", timeout=5)
    assert claimed["_at"] - t0 < 1.0
    assert w.stop() == 0


def test_metrics_endpoint_counts_runs_tokens_and_claims(
    db: str, wsim: SimServer, workers: list[WorkerProcess]
) -> None:
    wsim.reset(responder="heuristic")
    prepare(db, ["t1"])
    w = WorkerProcess(db, wsim.base_url, "--metrics-port", "0")
    workers.append(w)
    (m,) = w.wait_for("metrics", timeout=90)
    w.ready()
    offer_cold(db, "t1", "I prefer tea.")
    w.wait_for("run_finished")
    with urllib.request.urlopen(f"http://127.0.0.1:{m['port']}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    assert (
        'ember_worker_runs_total{model="claude-haiku-4-5",path="cold",pipeline="shadow",'
        'status="completed"} 1.0' in text
    )
    assert 'ember_worker_claims_total{pipeline="shadow"} 1.0' in text
    assert 'kind="input"' in text and "ember_worker_call_seconds_bucket" in text
    assert "ember_worker_ticks_total" in text
    assert w.stop() == 0


def test_an_unreachable_database_is_one_line_and_retried(wsim: SimServer) -> None:
    w = WorkerProcess("postgresql://ember@127.0.0.1:1/nowhere", wsim.base_url)
    try:
        lines = w.wait_for("db_unreachable", count=2, timeout=90)
        assert all("127.0.0.1:1" in e["msg"] for e in lines)
        assert "Traceback" not in w.output
        assert w.stop(10) == 0
    finally:
        if w.proc.poll() is None:
            w.kill()
    assert API_KEY not in w.output


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        ([], {"ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": ""}, "no ANTHROPIC_API_KEY"),
        (["--concurrency", "0"], {}, "--concurrency must be at least 1"),
        (["--pipelines", "nonsense"], {}, "unknown pipeline(s) nonsense"),
        (["--lease", "-1"], {}, "must be positive"),
    ],
)
def test_configuration_errors_exit_2(
    args: list[str], env: dict[str, str], says: str, wsim: SimServer
) -> None:
    import os

    full = {**os.environ, "ANTHROPIC_BASE_URL": wsim.base_url, "ANTHROPIC_API_KEY": API_KEY}
    full.update(env)
    proc = subprocess.run(
        [EMBER, "worker", "--database-url", "postgresql://x@127.0.0.1:1/x", *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert says in proc.stderr
    assert "Traceback" not in proc.stderr
    assert API_KEY not in proc.stderr + proc.stdout


def test_a_database_without_the_schema_is_a_clear_startup_error(
    empty_db: str, wsim: SimServer
) -> None:
    w = WorkerProcess(empty_db, wsim.base_url)
    try:
        assert w.proc.wait(30) == 7  # the CLI's "not migrated" code (docs/operations.md)
        w._reader.join(5)
        (line,) = w.wait_for("db_not_migrated")
        assert "ember migrate" in line["msg"]
        assert "Traceback" not in w.output
    finally:
        if w.proc.poll() is None:
            w.kill()


def test_one_worker_ticks_for_the_fleet_and_another_takes_over_when_it_dies(
    db: str, wsim: SimServer, workers: list[WorkerProcess]
) -> None:
    prepare(db, [])
    a = _start(workers, db, wsim, "--tick-interval", "0.2", name="a")
    a.wait_for("ticker")
    # b leaves the tick to a while a ticked within half of b's interval (1.5 s: a stall of a's
    # 0.2 s ticks on a loaded machine must not count as a's end).
    b = _start(workers, db, wsim, "--tick-interval", "3", name="b")
    with psycopg.connect(db, autocommit=True) as conn:
        tickers = set()
        for _ in range(10):  # two seconds, b's first calls among them: a keeps the tick
            tickers.add(conn.execute("SELECT worker FROM ember.fleet_tick").fetchone())
            time.sleep(0.2)
        assert tickers == {("a",)}
        assert not [e for e in b.events if e.get("event") == "ticker"]
        a.kill()
        b.wait_for("ticker", timeout=15)
        assert conn.execute("SELECT worker FROM ember.fleet_tick").fetchone() == ("b",)
    assert b.stop() == 0


def test_a_call_longer_than_the_lease_keeps_its_run(
    db: str, wsim: SimServer, workers: list[WorkerProcess]
) -> None:
    wsim.reset(responder="latency:2.5")
    prepare(db, ["t1"])
    # Offered before the worker starts: its frequent ticks then race no host write.
    offer_cold(db, "t1", "I prefer tea.")
    w = _start(workers, db, wsim, "--lease", "0.9", "--tick-interval", "0.2")
    (done,) = w.wait_for("run_finished", timeout=20)
    assert done["status"] == "completed"
    assert [r["status"] for r in runs(db)] == ["completed"]
    assert w.stop() == 0


def test_losing_every_database_connection_mid_call_loses_and_duplicates_nothing(
    db: str, wsim: SimServer, workers: list[WorkerProcess]
) -> None:
    gate = threading.Event()

    def held(_: Any) -> Reply:
        gate.wait(20)
        return Reply.tool_use(SHADOW_TOOL_NAME, {"facts": []})

    wsim.reset(responder=Scripted([held]))
    prepare(db, ["t1"])
    w = _start(workers, db, wsim, "--lease", "3")
    offer_cold(db, "t1", "The deploy succeeded.", human=False)
    wsim.wait_for_requests(1, timeout=10)
    with psycopg.connect(db, autocommit=True) as conn:
        cut = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name LIKE 'ember-worker:w1:%%'"
        ).fetchone()
    assert cut and cut[0] >= 3  # claim, listen, tick (and any pooled connection)
    w.wait_for("listening", count=2)
    gate.set()
    (done,) = w.wait_for("run_finished", timeout=20)
    assert done["status"] == "completed"
    assert [r["status"] for r in runs(db)] == ["completed"]
    assert w.stop() == 0


def test_an_imported_history_is_digested_without_waiting_for_idle_time(
    db: str, wsim: SimServer, workers: list[WorkerProcess], tmp_path: Any
) -> None:
    """Three sessions from 2023, the last still open: both pipelines read every one of them at
    the next ticks, with the default 20 minutes of idle time, since the rows are years old; and
    the worker's log stays JSON lines throughout."""
    import json

    from ember.transfer import format_record, header_line, run_import

    wsim.reset(responder="heuristic")
    prepare(db)
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT ember.ensure_steward_thread('default')")
    lines = [header_line()]
    thread = {"type": "thread", "id": "old", "kind": "side", "title": "2023",
              "status": "active", "created_at": "2023-05-01T09:00:00.000000Z"}  # fmt: skip
    lines.append(format_record(thread))
    for g in range(3):
        day = f"2023-05-{1 + 7 * g:02d}"
        lines.append(format_record({
            "type": "generation", "thread": "old", "ordinal": g + 1,
            "started_at": f"{day}T09:00:00.000000Z",
            "ended_at": None if g == 2 else f"{day}T10:00:00.000000Z",
        }))  # fmt: skip
        for k in range(4):
            role = "user" if k % 2 == 0 else "assistant"
            lines.append(format_record({
                "type": "message", "thread": "old", "generation": g + 1, "role": role,
                "author": "human" if role == "user" else "agent",
                "content": f"I moved to Lisbon in session {g}" if role == "user" else "Noted.",
                "created_at": f"{day}T09:0{k}:00.000000Z",
            }))  # fmt: skip
    path = tmp_path / "old.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with psycopg.connect(db) as conn:
        assert run_import(conn, path, partial=False, progress=False).messages == 12
    w = _start(
        workers, db, wsim, "--pipelines", "shadow,steward", "--tick-interval", "1",
        "--poll-interval", "1",
    )  # fmt: skip
    deadline = time.monotonic() + 90
    with psycopg.connect(db, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM ember.generation_progress"
                "        WHERE thread_id = 'old' AND unread),"
                " (SELECT count(*) FROM ember.messages WHERE thread_id = 'old'"
                "        AND episode_id IS NULL)"
            ).fetchone()
            if row == (0, 0):
                break
            assert time.monotonic() < deadline, f"not digested: unread, undigested = {row}"
            time.sleep(0.2)
        completed = conn.execute(
            "SELECT count(*) FROM ember.shadow_runs"
            " WHERE thread_id = 'old' AND status = 'completed'"
        ).fetchone()
    assert completed == (3,), "one shadow run per session, the open one included"
    w.stop()
    for line in w.lines:
        json.loads(line)  # every line of the worker's log is JSON
