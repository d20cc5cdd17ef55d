"""Lock order: everything that touches a thread and its running run takes the thread first.

A human append (which cancels the running run) and submit_shadow_run lock the thread, then the
run. tick() abandons expired runs and re-offers their threads; if it locked the run first, a
tick and a human message arriving together could deadlock.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import psycopg

from pgwait import blocked_on_lock

T0 = datetime.now(UTC) + timedelta(days=1)


def test_tick_abandoning_a_run_and_a_human_message_do_not_deadlock(db: str) -> None:
    with psycopg.connect(db) as conn:
        conn.execute("SELECT ember.create_thread('default', 's1', 'side')")
        conn.execute("SELECT ember.shadow_activate()")
        conn.execute("SELECT ember.append_message('default', 's1', 'assistant', 'a conclusion')")
        conn.execute("SELECT ember.shadow_memory_changed('default', 's1', 'task-ended')")
        plan = conn.execute("SELECT ember.claim_shadow_run('w', '1 minute')").fetchone()
        assert plan is not None and plan[0] is not None

    human = psycopg.connect(db, application_name="human-append")
    ticker = psycopg.connect(db, application_name="ticker")
    errors: list[BaseException] = []
    try:
        # The human's transaction holds the thread, as append_message does.
        human.execute("SELECT ember.lock_thread('default', 's1')")

        def run_tick() -> None:
            try:
                ticker.execute("SELECT ember.tick(%s)", (T0 + timedelta(hours=1),))
                ticker.commit()
            except BaseException as exc:  # asserted below
                errors.append(exc)
                ticker.rollback()

        t = threading.Thread(target=run_tick)
        t.start()
        assert blocked_on_lock(db, "ticker"), "tick must wait for the thread"
        # Now the human message: its cancel trigger needs the run row. Had tick locked the run
        # before waiting for the thread, this would be a deadlock.
        human.execute("SET lock_timeout = '10s'")
        human.execute("SELECT ember.append_message('default', 's1', 'user', 'stop, please')")
        human.commit()
        t.join(30)
    finally:
        human.close()
        ticker.close()
    assert errors == []
    with psycopg.connect(db) as conn:
        row = conn.execute("SELECT status FROM ember.shadow_runs").fetchone()
    # The human message committed first, so when tick reached the expired run it was already the
    # user's interruption: recorded cancelled, not abandoned.
    assert row is not None and row[0] == "cancelled"
