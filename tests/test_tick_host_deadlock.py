"""tick() and the host's writes take thread row locks in one order: by thread id, thread first.

A host transaction that writes several threads (a turn on one thread and the report it sends
to another, say) locks them one after another in id order, and under each thread lock writes
that thread's state rows (shadow_thread_state, generation_changes, signals). If tick wrote any
of those rows before holding the thread, or locked threads out of id order, the two could wait
on each other and PostgreSQL would end one of them with `deadlock detected`.

Several host connections hammer append_message, turn_ended, task_ended and start_generation
across many threads while one connection runs tick() in a loop, a bounded number of times.
"""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime, timedelta

import psycopg

THREADS = [f"t{i:02d}" for i in range(24)]
HOSTS = 3
HOST_TRANSACTIONS = 150
TICKS = 60
# tick's clock a day ahead: every thread with unread rows is idle, so tick offers and writes
# state for all of them on every round.
LATER = datetime.now(UTC) + timedelta(days=1)


def _host(db: str, seed: int, errors: list[BaseException]) -> None:
    rng = random.Random(seed)
    try:
        with psycopg.connect(db) as conn:
            conn.execute("SET lock_timeout = '60s'")
            for _ in range(HOST_TRANSACTIONS):
                # Each transaction writes two to four threads, in id order like every host
                # function that touches more than one thread.
                for thread in sorted(rng.sample(THREADS, rng.randint(2, 4))):
                    op = rng.random()
                    if op < 0.45:
                        conn.execute(
                            "SELECT ember.append_message('default', %s, 'assistant', 'progress')",
                            (thread,),
                        )
                    elif op < 0.65:
                        conn.execute(
                            "SELECT ember.turn_ended('default', %s, %s)",
                            (thread, rng.random() < 0.7),
                        )
                    elif op < 0.85:
                        conn.execute("SELECT ember.task_ended('default', %s)", (thread,))
                    elif seed == 0:
                        # One host starts generations: two racing start_generation calls on a
                        # thread could draw their times in one order and commit in the other,
                        # which start_generation refuses (EM019), as it should.
                        conn.execute("SELECT ember.start_generation('default', %s)", (thread,))
                    else:
                        conn.execute("SELECT ember.turn_ended('default', %s, true)", (thread,))
                conn.commit()
    except BaseException as exc:  # asserted by the test
        errors.append(exc)


def _ticker(db: str, stop: threading.Event, errors: list[BaseException], ticks: list[int]) -> None:
    try:
        with psycopg.connect(db) as conn:
            conn.execute("SET lock_timeout = '60s'")
            for _ in range(TICKS):
                if stop.is_set():
                    break
                conn.execute("SELECT ember.tick(%s)", (LATER,))
                conn.commit()
                ticks[0] += 1
    except BaseException as exc:  # asserted by the test
        errors.append(exc)


def test_tick_and_host_writes_on_many_threads_never_deadlock(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        for thread in THREADS:
            conn.execute("SELECT ember.create_thread('default', %s, 'task')", (thread,))
            conn.execute(
                "SELECT ember.append_message('default', %s, 'assistant', 'start')", (thread,)
            )
        conn.execute("SELECT ember.shadow_activate()")

    errors: list[BaseException] = []
    ticks = [0]
    stop = threading.Event()
    hosts = [threading.Thread(target=_host, args=(db, seed, errors)) for seed in range(HOSTS)]
    ticker = threading.Thread(target=_ticker, args=(db, stop, errors, ticks))
    ticker.start()
    for h in hosts:
        h.start()
    for h in hosts:
        h.join(300)
    stop.set()
    ticker.join(300)

    assert not any(h.is_alive() for h in hosts) and not ticker.is_alive()
    deadlocks = [e for e in errors if isinstance(e, psycopg.errors.DeadlockDetected)]
    assert deadlocks == [], (
        f"{len(deadlocks)} deadlocks, first: {deadlocks[0] if deadlocks else ''}"
    )
    assert errors == []
    # The ticks ran alongside the hosts, not after them.
    assert ticks[0] > 0
