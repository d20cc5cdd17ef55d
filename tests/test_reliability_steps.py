"""Every pipeline's work killed, frozen and slowed at each boundary of a run, with real processes
(`ember worker`, or `ember compare --semantic` for the semantic judge) and real signals against
the simulator over HTTP; each family records its figures in the ledger (tests/reliability.py).

A run has four boundaries: claimed but not yet calling, the call out, the answer in hand but not
yet written, and the write in flight. The first and third are reached with the test-only hook
`EMBER_FAULT_PAUSE=<pipeline>:<step>` (ember/faults.py); the call is held by the simulator, and
the submit by a lock this test takes on the row (or table) the submit must write, so that the
process is killed while its statement waits inside the server. The database is told to check
for a vanished client (`client_connection_check_interval`), so the orphaned statement is rolled
back instead of finishing on its own once the lock is gone.

After each scenario a second process finishes the work, and SQL counts say: nothing lost (the
work is done), nothing done twice (one completed run, no proposal, fact, merge or judged pair
written twice, no row digested by two runs), no lease left running. Leases are 2 s, renewed every
0.7 s, so each scenario takes seconds; waits are on log lines, simulator requests and SQL states,
each with a timeout, never on a fixed sleep.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from psycopg import sql

import comparedata as data
from ember.sim import Hang, SimServer
from ember.sim.responders import HostTurns, Outcome, SimRequest, is_memory_request
from reliability import record
from workerkit import API_KEY, EMBER, WorkerProcess, host_on, host_turn, offer_cold, prepare

ROOT = Path(__file__).resolve().parents[1]
LEASE = "2"
STEPS = ("before-call", "in-call", "before-submit", "in-submit")
PIPELINES = ("shadow-hot", "shadow-cold", "steward", "consolidation", "judge")
LEASED = PIPELINES[:-1]
TIMEOUT = 60.0


def _one(url: str, query: str, *args: Any) -> Any:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(query, args or None).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return row[0]


def _until(url: str, query: str, *args: Any, timeout: float = TIMEOUT) -> None:
    """Poll until the query is true: a state of the database another process moves to."""
    deadline = time.monotonic() + timeout
    while not _one(url, query, *args):
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout}s: {query} {args}")
        time.sleep(0.1)


class Held:
    """`ember sim --responder host` (the host's own turns get a text, Ember's requests the
    heuristic answer), except for the `nth` of Ember's requests: never answered (`hang`), or
    answered only once `release` is set (`hold`)."""

    name = "held"

    def __init__(self, mode: str | None = None, nth: int = 1) -> None:
        self.mode, self.nth = mode, nth
        self.inner = HostTurns()
        self.arrived = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()
        self.memory = 0

    async def respond(self, request: SimRequest) -> Outcome:
        if is_memory_request(request):
            with self._lock:
                self.memory += 1
                n = self.memory
            if self.mode and n == self.nth:
                self.arrived.set()
                if self.mode == "hang":
                    return Hang()
                await anyio.to_thread.run_sync(self.release.wait)
        return await self.inner.respond(request)

    def wait_arrived(self, proc: WorkerProcess | Lines) -> None:
        """Until the held request is in; fails at once if the process sending it exits."""
        deadline = time.monotonic() + TIMEOUT
        while not self.arrived.wait(0.1):
            if proc.proc.poll() is not None or time.monotonic() > deadline:
                tail = "\n".join(proc.lines[-20:])
                raise AssertionError(f"the held request never arrived:\n{tail}")


class Lines:
    """`ember compare --semantic` as a child process, its output collected as it arrives."""

    def __init__(self, url: str, base_url: str, env: dict[str, str] | None = None) -> None:
        full = {
            **os.environ,
            "DATABASE_URL": url,
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": API_KEY,
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        self.proc = subprocess.Popen(
            [EMBER, "compare", "--semantic"],
            env=full,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_line(self, text: str, timeout: float = TIMEOUT) -> None:
        with self._cond:
            ok = self._cond.wait_for(
                lambda: any(text in line for line in self.lines) or self.proc.poll() is not None,
                timeout,
            )
            seen = any(text in line for line in self.lines)
        assert ok and seen, f"no line with {text!r}:\n" + "\n".join(self.lines[-20:])

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._reader.join(5)

    def wait(self, timeout: float = TIMEOUT) -> int:
        rc = self.proc.wait(timeout)
        self._reader.join(5)
        return rc


# --- the pipelines ---


@dataclass(frozen=True)
class Case:
    name: str  # the scenario's pipeline, as parametrized
    fault: str  # the pipeline's name in EMBER_FAULT_PAUSE (and --pipelines)
    nth: int  # which of the pipeline's model calls the scenario stops at
    submit: str  # the function the write calls, as pg_stat_activity shows the statement
    lock: str  # what this test locks so that the write waits
    runs: str | None  # the leased runs' table


CASES = {
    "shadow-hot": Case(
        "shadow-hot",
        "shadow",
        1,
        "ember.submit_shadow_run",
        "SELECT 1 FROM ember.shadow_runs WHERE status = 'running' FOR UPDATE",
        "ember.shadow_runs",
    ),
    "shadow-cold": Case(
        "shadow-cold",
        "shadow",
        1,
        "ember.submit_shadow_run",
        "SELECT 1 FROM ember.shadow_runs WHERE status = 'running' FOR UPDATE",
        "ember.shadow_runs",
    ),
    # The steward's third round is the one that finishes, after the second wrote the facts: the
    # boundary where a lost run would leave facts behind that a second wake could write again.
    "steward": Case(
        "steward",
        "steward",
        3,
        "ember.steward_step",
        "SELECT 1 FROM ember.steward_runs WHERE status = 'running' FOR UPDATE",
        "ember.steward_runs",
    ),
    "consolidation": Case(
        "consolidation",
        "consolidation",
        1,
        "ember.submit_consolidation_run",
        "SELECT 1 FROM ember.consolidation_runs WHERE status = 'running' FOR UPDATE",
        "ember.consolidation_runs",
    ),
    "judge": Case(
        "judge",
        "judge",
        1,
        "ember.submit_judge_run",
        "LOCK TABLE ember.judge_runs IN SHARE MODE",
        None,
    ),
}

WORKER_ENV = {
    "EMBER_EMBEDDER": "hashembed:HashEmbedder",
    "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT / "tests"), os.environ.get("PYTHONPATH")])
    ),
}


def _hot_turn(url: str, sim: SimServer) -> None:
    """One real host turn on t1 through the SDK, its exact bytes noted as the thread's prefix."""
    host_turn(url, sim.base_url)


def _prepare(case: Case, url: str, sim: SimServer) -> None:
    if case.name == "shadow-hot":
        prepare(url, ["t1"])
        _hot_turn(url, sim)
    elif case.name == "shadow-cold":
        prepare(url, ["t1"])
        offer_cold(url, "t1", "I prefer tea.")
    elif case.name == "steward":
        with host_on(url) as host:
            host.create_thread("main", "main")
            host.conn.execute(
                "SELECT ember.set_thread_model('default', 'main', 'claude-haiku-4-5')"
            )
            host.conn.execute("SELECT ember.ensure_steward_thread('default')")
            host.conn.execute("SELECT ember.set_setting('idle_before_digest', '0 seconds')")
            host.create_thread("trip", "side")
            host.append_message("trip", "user", "I prefer tea over coffee.", author="human")
            host.task_ended("trip")
    elif case.name == "consolidation":
        with host_on(url) as host:
            host.create_thread("main", "main")
            host.conn.execute("SELECT ember.set_setting('consolidation_interval', '0 seconds')")
            for thread, said, text in (
                ("a", "I prefer tea.", "The user prefers tea."),
                ("b", "I really prefer tea.", "User prefers tea."),
            ):
                host.create_thread(thread, "side")
                mid = host.append_message(thread, "user", said, author="human")
                fid = host.conn.execute(
                    "INSERT INTO ember.facts (text, evidence_kind, categories, source_threads)"
                    " VALUES (%s, 'user-stated', '{}', ARRAY[%s]) RETURNING id",
                    (text, thread),
                ).fetchone()
                assert fid is not None
                host.conn.execute(
                    "INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id)"
                    " VALUES (%s, 1, %s)",
                    (fid[0], mid),
                )
    else:
        with psycopg.connect(url, autocommit=True) as conn:
            data.setup(conn)
            data.thread(conn, "ops")
            m = data.message(conn, "ops", "Deploys go through the CI pipeline.")
            data.proposal(conn, data.shadow_run(conn, "ops"), "Deploys go through CI.", m)
            data.fact(conn, "Deploys go through the CI pipeline.", m)


def _start(
    case: Case, url: str, sim: SimServer, name: str, fault: str | None = None
) -> WorkerProcess | Lines:
    # A claim is made once a run; the steward reaches before-submit once a round.
    nth = case.nth if fault == "before-submit" else 1
    env = {"EMBER_FAULT_PAUSE": f"{case.fault}:{fault}:{nth}"} if fault else {}
    if case.runs is None:
        return Lines(url, sim.base_url, env)
    proc = WorkerProcess(
        url,
        sim.base_url,
        "--pipelines",
        case.fault,
        "--lease",
        LEASE,
        "--tick-interval",
        "1",
        "--poll-interval",
        "1",
        name=name,
        env={**WORKER_ENV, **env},
    )
    return proc.ready()


def _finish(case: Case, url: str, sim: SimServer) -> None:
    """A second process does the work the first left, to the end."""
    second = _start(case, url, sim, "w2")
    if isinstance(second, Lines):
        assert second.wait() == 0, "\n".join(second.lines)
        return
    try:
        second.wait_for(
            "run_finished",
            lambda e: e.get("pipeline") == case.fault and e.get("status") == "completed",
            timeout=TIMEOUT,
        )
        assert second.stop() == 0
    finally:
        if second.proc.poll() is None:
            second.kill()


def _check(case: Case, url: str) -> dict[str, int]:
    """0 lost, 0 done twice, 0 leases running; the counts behind it."""
    with psycopg.connect(url, autocommit=True) as conn:

        def one(query: str) -> Any:
            row = conn.execute(query).fetchone()  # type: ignore[arg-type]
            assert row is not None
            return row[0]

        if case.runs is not None:
            table = sql.SQL(case.runs)
            running, completed, stopped = conn.execute(
                sql.SQL(
                    "SELECT count(*) FILTER (WHERE status = 'running'),"
                    " count(*) FILTER (WHERE status = 'completed'),"
                    " count(*) FILTER (WHERE status NOT IN ('running', 'completed')) FROM {}"
                ).format(table)
            ).fetchone() or (None, None, None)
            assert (running, completed) == (0, 1), (running, completed, stopped)
        if case.fault == "shadow":
            path = "hot" if case.name == "shadow-hot" else "cold"
            assert one(f"SELECT path = '{path}' FROM ember.shadow_runs WHERE status = 'completed'")
            written = one("SELECT count(*) FROM ember.shadow_proposals")
            assert written >= 1, "the completed run proposed"
            assert (
                one(
                    "SELECT count(*) FROM ember.shadow_proposals AS p JOIN ember.shadow_runs AS r"
                    " ON r.id = p.run_id WHERE r.status <> 'completed'"
                )
                == 0
            ), "no proposal of a run that did not complete"
            assert (
                one("SELECT count(DISTINCT (thread_id, text)) FROM ember.shadow_proposals")
                == written
            ), "no proposal twice"
            return {"stopped": stopped, "written": written}
        if case.fault == "steward":
            written = one("SELECT count(*) FROM ember.facts WHERE status = 'active'")
            assert written >= 1
            assert one("SELECT count(DISTINCT text) FROM ember.facts") == one(
                "SELECT count(*) FROM ember.facts"
            ), "no fact written twice"
            assert (
                one(
                    "SELECT count(*) FROM ember.messages AS m WHERE m.thread_id = 'trip'"
                    " AND m.episode_id IS DISTINCT FROM"
                    " (SELECT episode_id FROM ember.steward_runs WHERE status = 'completed')"
                )
                == 0
            ), "every row digested, by the completed run"
            # Facts the stopped run wrote before it stopped stay, and the second wake, which
            # searches before it writes, finds them instead of writing them again.
            kept = one(
                "SELECT count(*) FROM ember.facts WHERE run_id IS DISTINCT FROM"
                " (SELECT id FROM ember.steward_runs WHERE status = 'completed')"
            )
            return {"stopped": stopped, "written": written, "kept": kept}
        if case.fault == "consolidation":
            assert (
                one(
                    "SELECT count(*) FROM ember.consolidation_actions WHERE action = 'merge'"
                    " AND status = 'applied'"
                )
                == 1
            ), "the duplicate merged once"
            assert one("SELECT count(*) FROM ember.facts WHERE merged_into IS NOT NULL") == 2
            assert one("SELECT count(*) FROM ember.facts WHERE status = 'active'") == 1
            assert (
                one(
                    "SELECT count(*) FROM ember.consolidation_actions AS a"
                    " JOIN ember.consolidation_runs AS r ON r.id = a.run_id"
                    " WHERE r.status <> 'completed'"
                )
                == 0
            ), "no action of a run that did not complete"
            return {"stopped": stopped, "written": 1}
        runs = conn.execute("SELECT status FROM ember.judge_runs").fetchall()
        assert runs == [("completed",)], runs
        pairs = one("SELECT count(*) FROM ember.judged_pairs")
        assert pairs == 1, "the pair judged once"
        return {"stopped": 0, "written": pairs}


# --- the kill at each step ---


def _blocked_submit(url: str, case: Case) -> int:
    """The pid of the backend whose write waits on this test's lock."""
    query = (
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND query LIKE %s"
    )
    pattern = f"%{case.submit}(%"
    deadline = time.monotonic() + TIMEOUT
    while True:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(query, (pattern,)).fetchone()
        if row is not None:
            return int(row[0])
        if time.monotonic() > deadline:
            raise AssertionError(f"no {case.submit} waiting on the lock within {TIMEOUT}s")
        time.sleep(0.05)


@pytest.fixture(name="url")
def _url(db: str) -> str:
    """The test's database, told to notice a client that vanished mid-statement: a write whose
    process was killed while it waited is then rolled back, not finished by the server alone."""
    with psycopg.connect(db, autocommit=True) as conn:
        name = conn.info.dbname
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET client_connection_check_interval = '100ms'").format(
                sql.Identifier(name)
            )
        )
    return db


@contextmanager
def _sim(responder: Held) -> Iterator[SimServer]:
    with SimServer(responder=responder) as sim:
        try:
            yield sim
        finally:
            responder.release.set()


KILLED: dict[tuple[str, str], dict[str, int]] = {}


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("pipeline", PIPELINES)
def test_kill_minus_nine_at_each_step(url: str, pipeline: str, step: str) -> None:
    case = CASES[pipeline]
    held = Held({"in-call": "hang", "in-submit": "hold"}.get(step), case.nth)
    with _sim(held) as sim:
        _prepare(case, url, sim)
        fault = step if step in ("before-call", "before-submit") else None
        first = _start(case, url, sim, "w1", fault)
        lock: psycopg.Connection[Any] | None = None
        try:
            if fault is not None:
                if isinstance(first, Lines):
                    first.wait_line(f"fault pause at judge:{fault}")
                else:
                    first.wait_for("fault_pause", timeout=TIMEOUT)
                if fault == "before-submit":
                    assert held.memory >= case.nth, "the answer had arrived"
            else:
                held.wait_arrived(first)
            if step == "in-submit":
                lock = psycopg.connect(url)
                lock.execute(case.lock)  # type: ignore[arg-type]
                held.release.set()
                waiting = _blocked_submit(url, case)
            first.kill()  # SIGKILL: no release, no submit, no goodbye
            if lock is not None:
                # The killed process's statement is rolled back by the server, not left to
                # finish once the lock is gone.
                _until(
                    url,
                    "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = %s)",
                    waiting,
                )
                lock.rollback()
        finally:
            if lock is not None:
                lock.close()
            first.kill()
        _finish(case, url, sim)
    figures = _check(case, url)
    if case.runs is not None:
        assert figures["stopped"] == 1, "the killed run ended abandoned"
    KILLED[(pipeline, step)] = figures
    if len(KILLED) == len(PIPELINES) * len(STEPS):
        abandoned = sum(f["stopped"] for f in KILLED.values())
        kept = sum(f.get("kept", 0) for f in KILLED.values())
        record(
            "kill-steps",
            f"SIGKILL of the process of each of {len(PIPELINES)} pipelines (shadow hot and"
            " cold, steward at its finishing round, consolidation, semantic judge) at each of 4"
            " boundaries: claimed before the call, during the call, answer in hand before the"
            f" submit, and during the submit; {abandoned} leased runs lapsed and were abandoned,"
            f" a second process finished each ({kept} facts a stopped steward run had written"
            " were found by the next wake's search, not written again)",
            len(KILLED),
            "0 runs lost; 0 proposals, facts, merges or judged pairs written twice; 0 rows"
            " digested twice; 0 leases left running",
            "tests/test_reliability_steps.py",
        )


# --- a call past the lease: hanging, or slow and answering ---


def _entry(proc: WorkerProcess, match: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The first log entry of `proc` that matches, waited for."""
    with proc._cond:
        proc._cond.wait_for(
            lambda: any(match(e) for e in proc.events) or proc.proc.poll() is not None, TIMEOUT
        )
        found = [e for e in proc.events if match(e)]
    assert found, "\n".join(proc.lines[-20:])
    return found[0]


def _lease_outlived(url: str, case: Case) -> None:
    """The live worker kept its lease past the lease's own length (renewed while the call ran)."""
    assert case.runs is not None
    _until(
        url,
        sql.SQL(
            "SELECT EXISTS (SELECT 1 FROM {} WHERE status = 'running'"
            " AND lease_expires_at > started_at + 2 * %s * interval '1 second')"
        )
        .format(sql.SQL(case.runs))
        .as_string(None),
        int(LEASE),
    )


def _frozen_past_the_lease(
    url: str, case: Case, first: WorkerProcess, *, tick: bool = True
) -> None:
    """SIGSTOP, as a stalled VM or process would be: no renewal, until the lease lapses."""
    assert case.runs is not None
    first.signal(signal.SIGSTOP)
    _until(
        url,
        sql.SQL(
            "SELECT NOT EXISTS (SELECT 1 FROM {} WHERE status = 'running'"
            " AND lease_expires_at > clock_timestamp())"
        )
        .format(sql.SQL(case.runs))
        .as_string(None),
    )
    if case.fault == "shadow" and tick:
        # A shadow run is abandoned by tick(). Another worker's tick would do it within half its
        # interval of the frozen worker's last tick (test_a_frozen_ticker_stops_no_fleet_tick);
        # made here, the test does not wait for that interval.
        _one(url, "SELECT ember.tick()")


@contextmanager
def _held_first_worker(
    url: str, case: Case, mode: str
) -> Iterator[tuple[Held, SimServer, WorkerProcess]]:
    """A simulator that holds the case's nth memory request (`mode`: "hang" or "hold"), and a
    first worker started against it; on the way out a worker still running is resumed (it may
    be frozen) and killed."""
    held = Held(mode, case.nth)
    with _sim(held) as sim:
        _prepare(case, url, sim)
        first = _start(case, url, sim, "w1")
        assert isinstance(first, WorkerProcess)
        try:
            yield held, sim, first
        finally:
            if first.proc.poll() is None:
                first.signal(signal.SIGCONT)
                first.kill()


HUNG: dict[str, dict[str, int]] = {}


@pytest.mark.parametrize("pipeline", LEASED)
def test_a_call_that_hangs_past_the_lease_is_given_up_and_done_once(
    url: str, pipeline: str
) -> None:
    case = CASES[pipeline]
    with _held_first_worker(url, case, "hang") as (held, sim, first):
        held.wait_arrived(first)
        _lease_outlived(url, case)
        _frozen_past_the_lease(url, case, first)
        _finish(case, url, sim)
        first.signal(signal.SIGCONT)
        # Its next renewal is refused: the call is aborted and nothing is submitted.
        _entry(first, lambda e: e.get("event") == "lease_lost")
        assert first.stop() == 0
    figures = _check(case, url)
    assert figures["stopped"] == 1
    HUNG[pipeline] = figures
    _record_hung()


def _record_hung() -> None:
    if set(HUNG) != set(PIPELINES):
        return
    record(
        "hang-past-lease",
        f"a call that never answers, in each of {len(PIPELINES)} pipelines. Shadow hot and"
        " cold, steward, consolidation: the live worker kept renewing its lease past the"
        " lease's length; frozen with SIGSTOP until the lease lapsed, the run was abandoned and"
        " a second worker did the work; resumed, the first worker's renewal was refused and it"
        " dropped the call without submitting. The semantic judge (no lease): interrupted with"
        " SIGINT, it had stored nothing, and the next run judged the group once",
        len(HUNG),
        "0 runs lost; 0 written twice; 0 submits from the process that gave up; 0 leases"
        " left running",
        "tests/test_reliability_steps.py",
    )


SLOW: dict[str, str] = {}


def _refused(entry: dict[str, Any]) -> bool:
    said = str(entry.get("msg") or entry.get("message") or "")
    return (
        "refused" in said
        or entry.get("event") == "lease_lost"
        or (entry.get("event") == "run_finished" and entry.get("status") == "lost")
    )


@pytest.mark.parametrize("pipeline", LEASED)
def test_a_slow_answer_after_the_lease_lapsed_is_refused_never_applied_twice(
    url: str, pipeline: str
) -> None:
    case = CASES[pipeline]
    with _held_first_worker(url, case, "hold") as (held, sim, first):
        held.wait_arrived(first)
        _frozen_past_the_lease(url, case, first)
        _finish(case, url, sim)
        # Woken, the worker has a renewal and the late answer's write to make at once; the
        # runs table is locked until the write has reached the database too, so that it is
        # the write, and not only the renewal, that the database refuses.
        lock = psycopg.connect(url)
        try:
            assert case.runs is not None
            lock.execute(sql.SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(sql.SQL(case.runs)))
            held.release.set()  # the slow answer is sent; the frozen worker reads it on waking
            first.signal(signal.SIGCONT)
            _blocked_submit(url, case)
        finally:
            lock.rollback()
            lock.close()
        how = _entry(first, _refused)
        assert first.stop() == 0
    figures = _check(case, url)
    assert figures["stopped"] == 1
    SLOW[pipeline] = "renewal" if how.get("event") == "lease_lost" else "submit"
    if len(SLOW) == len(LEASED):
        record(
            "slow-lease",
            "a call answered only after its lease lapsed (the worker frozen with SIGSTOP"
            f" meanwhile), in each of {len(LEASED)} leased pipelines, after a second worker had"
            " done the work; woken, each worker sent the late answer's write, which the database"
            " refused (the run abandoned)",
            len(SLOW),
            "0 late answers applied; 0 written twice; 0 leases left running",
            "tests/test_reliability_steps.py",
        )


def test_a_frozen_ticker_stops_no_fleet_tick(url: str) -> None:
    """A worker frozen after it ticked for the fleet (its connections open) leaves no lapsed shadow
    run in place: another worker's tick abandons it and the thread is offered again. With a
    session lock as the ticker's token this hung for good: the frozen worker held the lock."""
    case = CASES["shadow-cold"]
    held = Held("hang", case.nth)
    with _sim(held) as sim:
        _prepare(case, url, sim)
        first = _start(case, url, sim, "w1")
        assert isinstance(first, WorkerProcess)
        second: WorkerProcess | None = None
        try:
            held.wait_arrived(first)
            _frozen_past_the_lease(url, case, first, tick=False)
            second = WorkerProcess(
                url, sim.base_url, "--pipelines", "shadow", "--lease", LEASE,
                "--tick-interval", "1", "--poll-interval", "1", name="w2",
            ).ready()  # fmt: skip
            second.wait_for(
                "run_finished", lambda e: e.get("status") == "completed", timeout=5 * int(LEASE)
            )
        finally:
            first.signal(signal.SIGCONT)
            first.kill()
            if second is not None:
                second.kill()


def test_a_hung_judge_call_interrupted_stores_nothing_and_the_next_run_judges_once(
    url: str,
) -> None:
    """The semantic judge holds no lease (it is a command a person runs, not a leased run): a
    call that hangs holds nothing either, until the person interrupts it. Interrupted, it has
    stored nothing, and the next `ember compare --semantic` judges the group once."""
    case = CASES["judge"]
    held = Held("hang", case.nth)
    with _sim(held) as sim:
        _prepare(case, url, sim)
        first = _start(case, url, sim, "w1")
        assert isinstance(first, Lines)
        try:
            held.wait_arrived(first)
            first.proc.send_signal(signal.SIGINT)
            rc = first.wait()
        finally:
            first.kill()
        assert rc == 130, first.lines
        assert not any("Traceback" in line for line in first.lines), first.lines
        assert _one(url, "SELECT count(*) FROM ember.judge_runs") == 0
        _finish(case, url, sim)
    HUNG["judge"] = _check(case, url)
    _record_hung()
