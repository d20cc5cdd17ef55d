"""Appends to one thread are serialized, so seq order is commit order (invariant 8)."""

from __future__ import annotations

import threading
import time

import psycopg

from pgwait import blocked_on_lock


def _setup(url: str) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("SELECT ember.create_thread('default', 't1', 'side')")
        conn.execute("SELECT ember.create_thread('default', 't2', 'side')")


def test_second_append_waits_for_the_first_commit_and_gets_a_later_seq(db: str) -> None:
    _setup(db)
    a = psycopg.connect(db, application_name="appender-a")
    b = psycopg.connect(db, application_name="appender-b")
    try:
        a.execute(
            "SELECT ember.append_message('default', 't1', 'user', 'first')"
        )  # open transaction
        done = threading.Event()
        b_result: list[int] = []

        def append_b() -> None:
            row = b.execute(
                "SELECT ember.append_message('default', 't1', 'user', 'second')"
            ).fetchone()
            assert row is not None
            b.commit()
            b_result.append(int(row[0]))
            done.set()

        tb = threading.Thread(target=append_b)
        tb.start()
        assert blocked_on_lock(db, "appender-b"), "b must wait on a's lock on the thread"
        assert not done.is_set()
        a.commit()
        assert done.wait(10)
        tb.join(10)
    finally:
        a.close()
        b.close()
    with psycopg.connect(db) as conn:
        rows = conn.execute(
            "SELECT content, seq FROM ember.messages WHERE thread_id = 't1' ORDER BY seq"
        ).fetchall()
    assert [r[0] for r in rows] == ["first", "second"]


def test_other_threads_are_not_blocked(db: str) -> None:
    _setup(db)
    with psycopg.connect(db) as a, psycopg.connect(db) as b:
        a.execute("SELECT ember.append_message('default', 't1', 'user', 'held open')")
        b.execute("SET lock_timeout = '2s'")
        b.execute("SELECT ember.append_message('default', 't2', 'user', 'independent')")
        b.commit()
        a.commit()


def test_many_concurrent_appends_keep_seq_in_commit_order(db: str) -> None:
    """Two writers append alternately to one thread; the order rows become visible to a reader
    polling after each commit always matches seq order."""
    _setup(db)
    commit_log: list[int] = []
    log_lock = threading.Lock()

    def writer(tag: str) -> None:
        with psycopg.connect(db) as conn:
            for i in range(40):
                row = conn.execute(
                    "SELECT ember.append_message('default', 't1', 'user', %s)", (f"{tag}{i}",)
                ).fetchone()
                assert row is not None
                # Hold the transaction a moment so the other writer queues behind it.
                time.sleep(0.001)
                with log_lock:
                    conn.commit()
                    commit_log.append(int(row[0]))

    threads = [threading.Thread(target=writer, args=(t,)) for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    with psycopg.connect(db) as conn:
        by_seq = [
            int(r[0])
            for r in conn.execute(
                "SELECT id FROM ember.messages WHERE thread_id = 't1' ORDER BY seq"
            )
        ]
    assert by_seq == commit_log
