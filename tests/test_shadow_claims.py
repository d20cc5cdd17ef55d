"""Shadow claims under concurrency, and the NOTIFYs the worker waits on.

What a single pgTAP transaction cannot show: two claimers racing with SKIP LOCKED, appends that
commit while a claim reads the thread (invariant 8), leases across connections, and
notifications, which are delivered only at commit to another session.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from pgwait import blocked_on_lock

# Tests move time by passing p_now; T0 lies after any row's real creation time.
T0 = datetime.now(UTC) + timedelta(days=1)
CLAIM = "SELECT ember.claim_shadow_run(%s, '5 minutes')"


def _connect(url: str, **kw: Any) -> psycopg.Connection[Any]:
    return psycopg.connect(url, **kw)


def _setup(url: str, threads: list[str]) -> None:
    with _connect(url) as conn:
        conn.execute("SELECT ember.create_thread('default', 'main', 'main')")
        conn.execute("SELECT ember.shadow_activate()")
        for t in threads:
            conn.execute("SELECT ember.create_thread('default', %s, 'side')", (t,))


def _offer(conn: psycopg.Connection[Any], thread: str, text: str = "worth remembering") -> int:
    """An agent row and a standing offer: the thread becomes ready."""
    row = conn.execute(
        "SELECT ember.append_message('default', %s, 'assistant', %s)", (thread, text)
    ).fetchone()
    conn.execute("SELECT ember.shadow_memory_changed('default', %s, 'task-ended')", (thread,))
    assert row is not None
    return int(row[0])


def _claim(conn: psycopg.Connection[Any], worker: str = "w") -> dict[str, Any] | None:
    row = conn.execute(CLAIM, (worker,)).fetchone()
    assert row is not None
    plan: dict[str, Any] | None = row[0]
    return plan


def _complete(conn: psycopg.Connection[Any], plan: dict[str, Any]) -> None:
    conn.execute(
        "SELECT ember.submit_shadow_run('default', %s, %s, %s)",
        (
            plan["run_id"],
            plan["lease_token"],
            Jsonb(
                {
                    "status": "completed",
                    "error": None,
                    "usage": {
                        "input_tokens": 1,
                        "cache_read_input_tokens": 0,
                        "cache_creation_5m_input_tokens": 0,
                        "cache_creation_1h_input_tokens": 0,
                        "output_tokens": 1,
                    },
                    "latency_ms": 1,
                    "proposals": [],
                }
            ),
        ),
    )


def _seq(conn: psycopg.Connection[Any], message_id: int) -> int:
    row = conn.execute("SELECT seq FROM ember.messages WHERE id = %s", (message_id,)).fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def listener(db: str) -> Iterator[psycopg.Connection[Any]]:
    conn = _connect(db, autocommit=True)
    try:
        yield conn
    finally:
        conn.close()


def _notifies(conn: psycopg.Connection[Any], timeout: float) -> list[tuple[str, str]]:
    return [(n.channel, n.payload) for n in conn.notifies(timeout=timeout, stop_after=1)]


# Two claimers


def test_a_thread_being_claimed_is_skipped_not_waited_for(db: str) -> None:
    _setup(db, ["t1"])
    with _connect(db) as a, _connect(db) as b:
        _offer(a, "t1")
        a.commit()
        plan_a = _claim(a, "a")  # transaction still open: the thread row is locked
        assert plan_a is not None and plan_a["thread_id"] == "t1"
        b.execute("SET lock_timeout = '2s'")
        assert _claim(b, "b") is None, "the second claimer skips the locked thread"
        b.rollback()
        a.commit()
        assert _claim(b, "b") is None, "after the first claim commits, its run holds the thread"


def test_two_claimers_never_get_the_same_thread(db: str) -> None:
    threads = [f"t{i}" for i in range(24)]
    _setup(db, threads)
    with _connect(db) as conn:
        for t in threads:
            _offer(conn, t)
    claimed: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        try:
            with _connect(db) as conn:
                while True:
                    plan = _claim(conn, name)
                    conn.commit()
                    if plan is None:
                        return
                    with lock:
                        claimed.append(plan["thread_id"])
        except BaseException as exc:  # e.g. a unique violation: two claims of one thread
            errors.append(exc)

    workers = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert not errors, errors
    assert sorted(claimed) == sorted(threads), "every thread claimed exactly once"
    with _connect(db) as conn:
        row = conn.execute(
            "SELECT count(*), count(DISTINCT thread_id) FROM ember.shadow_runs"
        ).fetchone()
    assert row == (24, 24)


def test_concurrent_claimers_take_every_ready_thread_once_parked_ones_included(db: str) -> None:
    """N claimers against offers that keep arriving, some of them parked (no light model is
    tagged for health) until a tag lands mid-run: no thread is ever held by two runs, and when
    the claimers stop, nothing ready was skipped."""
    plain = [f"p{i}" for i in range(30)]
    health = [f"h{i}" for i in range(6)]
    with _connect(db) as conn:
        conn.execute("SELECT ember.define_category('health')")
        conn.execute("SELECT ember.create_thread('default', 'main', 'main')")
        conn.execute("SELECT ember.shadow_activate()")
        for t in plain:
            conn.execute("SELECT ember.create_thread('default', %s, 'side')", (t,))
        for t in health:
            conn.execute("SELECT ember.create_thread('default', %s, 'side', NULL, 'health')", (t,))
        for t in health + plain[:10]:
            _offer(conn, t)
    claimed: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    stop = threading.Event()

    def worker(name: str) -> None:
        try:
            with _connect(db) as conn:
                while True:
                    plan = _claim(conn, name)
                    conn.commit()
                    if plan is None:
                        if stop.is_set():
                            return
                        time.sleep(0.01)
                        continue
                    with lock:
                        claimed.append(plan["thread_id"])
                    _complete(conn, plan)
                    conn.commit()
        except BaseException as exc:  # e.g. a unique violation: two running runs of one thread
            errors.append(exc)

    workers = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for w in workers:
        w.start()
    with _connect(db) as conn:
        for t in plain[10:]:
            _offer(conn, t)
            conn.commit()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with lock:
                if len(claimed) >= len(plain):
                    break
            time.sleep(0.02)
        with lock:
            assert not set(health) & set(claimed), "no model may read health yet"
        conn.execute("UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-haiku-4-5'")
        conn.commit()
        while time.monotonic() < deadline:
            with lock:
                if len(claimed) >= len(plain) + len(health):
                    break
            time.sleep(0.02)
    stop.set()
    for w in workers:
        w.join(30)
    assert not errors, errors
    assert sorted(claimed) == sorted(plain + health), "every ready thread claimed, each once"
    with _connect(db) as conn:
        left = conn.execute(
            "SELECT count(*) FROM ember.shadow_ready() WHERE model IS NOT NULL"
        ).fetchone()
        runs = conn.execute(
            "SELECT count(*), count(DISTINCT thread_id) FROM ember.shadow_runs"
        ).fetchone()
    assert left == (0,), "nothing ready is left behind"
    assert runs == (36, 36)


# Appends racing with claims (invariant 8)


def test_a_row_whose_append_is_still_open_is_not_stepped_over(db: str) -> None:
    _setup(db, ["t1"])
    with _connect(db) as appender, _connect(db) as claimer:
        _offer(appender, "t1", "committed")
        appender.commit()
        late = _offer(appender, "t1", "still open")  # not committed yet
        claimer.execute("SET lock_timeout = '2s'")
        assert _claim(claimer) is None, "the thread is skipped while an append to it is open"
        claimer.commit()
        appender.commit()
        plan = _claim(claimer)
        claimer.commit()
        assert plan is not None
        assert plan["through_seq"] >= _seq(claimer, late)
        assert any(row.startswith(f"m:{late} ") for page in plan["pages"] for row in page)


def test_an_append_during_a_claim_lands_after_its_through_seq(db: str) -> None:
    _setup(db, ["t1"])
    with _connect(db) as claimer, _connect(db, application_name="late-appender") as appender:
        _offer(claimer, "t1")
        claimer.commit()
        plan = _claim(claimer)  # holds the thread lock until commit
        assert plan is not None
        result: list[int] = []

        def append() -> None:
            result.append(_offer(appender, "t1", "during the claim"))
            appender.commit()

        t = threading.Thread(target=append)
        t.start()
        assert blocked_on_lock(db, "late-appender"), "the append waits for the claim"
        claimer.commit()
        t.join(10)
        assert result
        assert _seq(claimer, result[0]) > plan["through_seq"]
        _complete(claimer, plan)
        claimer.commit()
        nxt = _claim(claimer)
        claimer.commit()
        assert nxt is not None and nxt["from_seq"] == plan["through_seq"]
        assert nxt["pages"][0][0].startswith("# ")  # the page header
        assert nxt["pages"][0][1].startswith(f"m:{result[0]} ")


def test_concurrent_appends_never_let_a_cursor_skip_a_row(db: str) -> None:
    """Writers append to three threads, holding their transactions open for a random moment,
    while two workers claim and complete runs. Afterwards the completed runs of each thread
    tile its rows exactly: every row is read once, none is stepped over."""
    threads = ["t1", "t2", "t3"]
    _setup(db, threads)
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        rnd = random.Random(seed)
        try:
            with _connect(db) as conn:
                for i in range(40):
                    _offer(conn, rnd.choice(threads), f"w{seed}-{i}")
                    time.sleep(rnd.random() * 0.004)
                    conn.commit()
        except BaseException as exc:  # surfaced by the main thread
            errors.append(exc)

    def worker(name: str) -> None:
        try:
            with _connect(db) as conn:
                while not stop.is_set():
                    plan = _claim(conn, name)
                    conn.commit()
                    if plan is None:
                        time.sleep(0.002)
                        continue
                    _complete(conn, plan)
                    conn.commit()
        except BaseException as exc:
            errors.append(exc)

    writers = [threading.Thread(target=writer, args=(s,)) for s in range(3)]
    workers = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(2)]
    for t in writers + workers:
        t.start()
    for t in writers:
        t.join(60)
    stop.set()
    for t in workers:
        t.join(60)
    assert not errors, errors

    with _connect(db) as conn:
        # Drain what is left, then check the tiling.
        for t in threads:
            conn.execute("SELECT ember.shadow_memory_changed('default', %s, 'task-ended')", (t,))
        while (plan := _claim(conn)) is not None:
            _complete(conn, plan)
        conn.commit()
        for t in threads:
            runs = conn.execute(
                "SELECT from_seq, through_seq FROM ember.shadow_runs "
                "WHERE thread_id = %s AND status = 'completed' ORDER BY id",
                (t,),
            ).fetchall()
            seqs = [
                int(r[0])
                for r in conn.execute(
                    "SELECT seq FROM ember.messages WHERE thread_id = %s ORDER BY seq", (t,)
                )
            ]
            assert runs, f"{t} was read"
            position = 0
            covered: list[int] = []
            for from_seq, through_seq in runs:
                assert from_seq == position, f"{t}: runs are contiguous"
                covered += [s for s in seqs if from_seq < s <= through_seq]
                position = through_seq
            assert covered == seqs, f"{t}: every row read exactly once"


# Leases across connections


def test_an_abandoned_run_can_be_claimed_by_another_worker(db: str) -> None:
    _setup(db, ["t1"])
    with _connect(db) as a, _connect(db) as b:
        _offer(a, "t1")
        a.commit()
        row = a.execute(
            "SELECT ember.claim_shadow_run('a', '1 minute', %s)", (T0 + timedelta(hours=1),)
        ).fetchone()
        assert row is not None and row[0] is not None
        a.commit()
        first = row[0]
        done = b.execute("SELECT ember.tick(%s)", (T0 + timedelta(hours=1, minutes=2),)).fetchone()
        assert done is not None and done[0]["runs_abandoned"] == [first["run_id"]]
        second = b.execute(
            "SELECT ember.claim_shadow_run('b', '5 minutes', %s)",
            (T0 + timedelta(hours=1, minutes=2),),
        ).fetchone()
        b.commit()
        assert second is not None and second[0] is not None
        assert second[0]["thread_id"] == "t1" and second[0]["run_id"] != first["run_id"]
        assert second[0]["from_seq"] == first["from_seq"], "the abandoned run read nothing"


# Notifications


def test_work_becoming_ready_notifies_ember_wake_at_commit(
    db: str, listener: psycopg.Connection[Any]
) -> None:
    _setup(db, ["t1"])
    listener.execute("LISTEN ember_wake")
    with _connect(db) as conn:
        _offer(conn, "t1")
        assert _notifies(listener, 0.3) == [], "nothing is delivered before commit"
        conn.commit()
    assert _notifies(listener, 10) == [("ember_wake", "")]


def test_a_deferred_offer_does_not_wake_until_the_turn_ends(
    db: str, listener: psycopg.Connection[Any]
) -> None:
    _setup(db, ["t1"])
    listener.execute("LISTEN ember_wake")
    with _connect(db, autocommit=True) as conn:
        conn.execute("SELECT ember.turn_started('default', 't1')")
        conn.execute("SELECT ember.append_message('default', 't1', 'assistant', 'x')")
        conn.execute("SELECT ember.task_ended('default', 't1')")
        assert _notifies(listener, 0.3) == [], "a busy thread is not work yet"
        conn.execute("SELECT ember.turn_ended('default', 't1', true)")
    assert _notifies(listener, 10) == [("ember_wake", "")]


def test_tick_notifies_ember_wake_when_it_makes_work_ready(
    db: str, listener: psycopg.Connection[Any]
) -> None:
    _setup(db, ["t1"])
    with _connect(db, autocommit=True) as conn:
        conn.execute(
            "SELECT ember.append_message("
            "'default', 't1', 'assistant', 'x', NULL, NULL, NULL, NULL, NULL, NULL, %s)",
            (T0,),
        )
        listener.execute("LISTEN ember_wake")
        conn.execute("SELECT ember.tick(%s)", (T0 + timedelta(minutes=5),))
        assert _notifies(listener, 0.3) == [], "not idle yet, nothing to wake for"
        conn.execute("SELECT ember.tick(%s)", (T0 + timedelta(minutes=20),))
    assert _notifies(listener, 10) == [("ember_wake", "")]


def test_a_human_message_notifies_ember_cancel_with_the_run_id(
    db: str, listener: psycopg.Connection[Any]
) -> None:
    _setup(db, ["t1"])
    listener.execute("LISTEN ember_cancel")
    with _connect(db) as conn:
        _offer(conn, "t1")
        conn.commit()
        plan = _claim(conn)
        conn.commit()
        assert plan is not None
        conn.execute(
            "SELECT ember.append_message('default', 't1', 'user', 'stop, I changed my mind')"
        )
        assert _notifies(listener, 0.3) == [], "nothing is delivered before commit"
        conn.commit()
    assert _notifies(listener, 10) == [("ember_cancel", str(plan["run_id"]))]
