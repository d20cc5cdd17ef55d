"""submit_shadow_run across sessions: late submits after the lease, and submits racing a cancel.

These need real commits and two connections, which a pgTAP transaction cannot give: the lease
is claimed and committed by one session, the expiry or the cancel comes from another.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from pgwait import blocked_on_lock

USAGE = {
    "input_tokens": 120,
    "cache_read_input_tokens": 4000,
    "cache_creation_5m_input_tokens": 30,
    "cache_creation_1h_input_tokens": 0,
    "output_tokens": 55,
}


def _setup(url: str) -> int:
    """Shadow on, one side thread with a human statement; returns that message's id."""
    with psycopg.connect(url) as conn:
        conn.execute("SELECT ember.shadow_activate()")
        conn.execute("SELECT ember.create_thread('default', 's1', 'side')")
        row = conn.execute(
            "SELECT ember.append_message('default', 's1', 'user', 'I am vegetarian.')"
        ).fetchone()
        assert row is not None
        return int(row[0])


def _claim(
    conn: psycopg.Connection[Any], lease: str = "10 minutes", ago: str = "0 seconds"
) -> tuple[int, str]:
    """Give s1 an unread row and an offer, claim it as of `ago` before now, and commit."""
    conn.execute("SELECT ember.append_message('default', 's1', 'assistant', 'Noted.')")
    conn.execute("SELECT ember.shadow_memory_changed('default', 's1', 'idle-or-ended')")
    row = conn.execute(
        "SELECT ember.claim_shadow_run('w1', %s::interval, clock_timestamp() - %s::interval)",
        (lease, ago),
    ).fetchone()
    conn.commit()
    assert row is not None and row[0] is not None, "s1 should be ready and claimed"
    plan = row[0]
    assert plan["thread_id"] == "s1"
    return int(plan["run_id"]), str(plan["lease_token"])


def _outcome(message_id: int, finished_at: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "status": "completed",
        "error": None,
        "usage": USAGE,
        "latency_ms": 900,
        "proposals": [
            {
                "text": "The user is vegetarian.",
                "evidence_kind": "user-stated",
                "evidence": [{"message_id": message_id}],
            },
            {
                "text": "The user is vegan.",
                "evidence_kind": "user-stated",
                "evidence": [{"message_id": message_id, "thread_id": "s1"}],
            },
        ],
    }
    if finished_at is not None:
        out["finished_at"] = finished_at
    return out


def _submit(conn: psycopg.Connection[Any], run: int, token: str, outcome: dict[str, Any]) -> Any:
    row = conn.execute(
        "SELECT ember.submit_shadow_run('default', %s, %s::uuid, %s)", (run, token, Jsonb(outcome))
    ).fetchone()
    assert row is not None
    return row[0]


def _run_state(url: str, run: int) -> tuple[str, str | None, int, bool]:
    """(status, error, proposal rows, cancel_requested), read by a third session."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            """SELECT r.status, r.error,
                      (SELECT count(*) FROM ember.shadow_proposals AS p WHERE p.run_id = r.id),
                      r.cancel_requested
               FROM ember.shadow_runs AS r WHERE r.id = %s""",
            (run,),
        ).fetchone()
    assert row is not None
    return str(row[0]), row[1], int(row[2]), bool(row[3])


# --- lease expiry --------------------------------------------------------------------------


def test_a_late_submit_after_lease_expiry_is_refused(db: str) -> None:
    message = _setup(db)
    with psycopg.connect(db, application_name="worker") as worker:
        # Claimed ten minutes ago with a five-minute lease, and committed: the lease has lapsed.
        run, token = _claim(worker, lease="5 minutes", ago="10 minutes")

        with pytest.raises(psycopg.Error) as late:
            _submit(worker, run, token, _outcome(message))
        worker.rollback()
        assert late.value.sqlstate == "EM042"
        assert _run_state(db, run) == ("running", None, 0, False)

        # Another session's tick marks the run abandoned and commits.
        with psycopg.connect(db) as ticker:
            ticker.execute("SELECT ember.tick()")
        assert _run_state(db, run)[0] == "abandoned"

        # Even claiming to have finished inside the lease does not bring it back.
        row = worker.execute(
            "SELECT (started_at + interval '1 minute')::text FROM ember.shadow_runs WHERE id = %s",
            (run,),
        ).fetchone()
        assert row is not None
        with pytest.raises(psycopg.Error) as abandoned:
            _submit(worker, run, token, _outcome(message, finished_at=row[0]))
        worker.rollback()
        assert abandoned.value.sqlstate == "EM043"

    status, error, proposals, _ = _run_state(db, run)
    assert (status, proposals) == ("abandoned", 0)
    assert error == "lease expired"


def test_a_submit_inside_its_lease_is_recorded(db: str) -> None:
    """The control for the test above: the same submit, in time, is recorded."""
    message = _setup(db)
    with psycopg.connect(db) as worker:
        run, token = _claim(worker)
        result = _submit(worker, run, token, _outcome(message))
        worker.commit()
    assert result == {
        "run_id": run,
        "status": "completed",
        "proposals": 2,
        "valid": 1,
        "rejected": 1,
    }
    assert _run_state(db, run)[:3] == ("completed", None, 2)


# --- a submit racing a cancel --------------------------------------------------------------


def test_a_cancel_committed_first_wins_and_no_proposal_is_stored(db: str) -> None:
    message = _setup(db)
    with (
        psycopg.connect(db, application_name="host") as host,
        psycopg.connect(db, application_name="worker") as worker,
    ):
        run, token = _claim(worker)
        host.execute(
            "SELECT ember.append_message('default', 's1', 'user', 'Wait, one more thing.')"
        )
        result: list[Any] = []

        def submit() -> None:
            result.append(_submit(worker, run, token, _outcome(message)))
            worker.commit()

        t = threading.Thread(target=submit)
        t.start()
        assert blocked_on_lock(db, "worker"), "the submit must wait for the human message"
        host.commit()
        t.join(10)
        assert not t.is_alive()
    assert result == [
        {"run_id": run, "status": "cancelled", "proposals": 0, "valid": 0, "rejected": 0}
    ]
    assert _run_state(db, run) == ("cancelled", "interrupted-by-user", 0, True)


def test_a_submit_committed_first_wins_and_the_late_cancel_changes_nothing(db: str) -> None:
    message = _setup(db)
    with (
        psycopg.connect(db, application_name="host") as host,
        psycopg.connect(db, application_name="worker") as worker,
    ):
        run, token = _claim(worker)
        assert _submit(worker, run, token, _outcome(message))["status"] == "completed"
        done = threading.Event()

        def speak() -> None:
            host.execute(
                "SELECT ember.append_message('default', 's1', 'user', 'Wait, one more thing.')"
            )
            host.commit()
            done.set()

        t = threading.Thread(target=speak)
        t.start()
        assert blocked_on_lock(db, "host"), "the human message must wait for the submit"
        worker.commit()
        assert done.wait(10)
        t.join(10)
    assert _run_state(db, run) == ("completed", None, 2, False)


def test_a_submit_starting_inside_a_human_append_neither_deadlocks_nor_mixes(db: str) -> None:
    """The append has locked the thread but not yet flagged the run when the submit starts.

    A submit that locked the run first would then wait for the thread (its proposals' foreign
    key), while the append's cancel waits for the run: a deadlock. The submit takes the thread
    first, so it queues behind the append and then sees the cancel.
    """
    message = _setup(db)
    with (
        psycopg.connect(db, application_name="host") as host,
        psycopg.connect(db, application_name="worker") as worker,
    ):
        run, token = _claim(worker)
        host.execute("SELECT ember.lock_thread('default', 's1')")  # what append_message does first
        result: list[Any] = []
        errors: list[BaseException] = []

        def submit() -> None:
            try:
                result.append(_submit(worker, run, token, _outcome(message)))
                worker.commit()
            except BaseException as exc:
                errors.append(exc)

        t = threading.Thread(target=submit)
        t.start()
        assert blocked_on_lock(db, "worker")
        host.execute(
            "SELECT ember.append_message('default', 's1', 'user', 'Wait, one more thing.')"
        )
        host.commit()
        t.join(10)
        assert not t.is_alive()
    assert errors == []
    assert result[0]["status"] == "cancelled"
    assert _run_state(db, run) == ("cancelled", "interrupted-by-user", 0, True)


def _race_once(
    host: psycopg.Connection[Any], worker: psycopg.Connection[Any], message: int, i: int
) -> int:
    """Claim a run, then release a submit and a human message at the same moment."""
    run, token = _claim(worker)
    gate = threading.Barrier(2)
    errors: list[BaseException] = []

    def submit() -> None:
        try:
            gate.wait(5)
            _submit(worker, run, token, _outcome(message))
            worker.commit()
        except BaseException as exc:
            errors.append(exc)

    def speak() -> None:
        try:
            gate.wait(5)
            host.execute(
                "SELECT ember.append_message('default', 's1', 'user', %s)", (f"interruption {i}",)
            )
            host.commit()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=submit), threading.Thread(target=speak)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert errors == [], errors
    return run


def test_racing_submits_and_cancels_never_mix(db: str) -> None:
    """Released together, many times: each run is either cancelled with no proposals or
    completed with all of them, and neither side ever fails."""
    message = _setup(db)
    with psycopg.connect(db) as host, psycopg.connect(db) as worker:
        for i in range(20):
            run = _race_once(host, worker, message, i)
            status, error, proposals, _ = _run_state(db, run)
            assert (status, error, proposals) in {
                ("cancelled", "interrupted-by-user", 0),
                ("completed", None, 2),
            }
