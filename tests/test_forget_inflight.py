"""A forget while a shadow run is in flight on the thread: the run is cancelled, the worker is
told at commit, and nothing of the erased text reaches the run's submit.

Needs real commits and three sessions (the worker holding the claim, a listener, the host that
forgets), which a pgTAP transaction cannot give.
"""

from __future__ import annotations

import json

import psycopg
from psycopg.types.json import Jsonb

from forgetkit import append, marker_hits

MARKER = "vaultword-7781"


def test_forget_cancels_an_in_flight_shadow_run_and_its_submit_stores_nothing(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as host:
        host.execute("SELECT ember.shadow_activate()")
        host.execute("SELECT ember.create_thread('default', 's1', 'side')")
        secret = append(host, "s1", "user", f"The alarm code is {MARKER}.")
        append(host, "s1", "assistant", "Noted.")
        host.execute("SELECT ember.shadow_memory_changed('default', 's1', 'idle-or-ended')")

    with (
        psycopg.connect(db) as worker,
        psycopg.connect(db, autocommit=True) as listener,
    ):
        claim = "SELECT ember.claim_shadow_run('w1', interval '10 minutes')"
        row = worker.execute(claim).fetchone()
        worker.commit()
        assert row is not None and row[0] is not None, "s1 should be ready and claimed"
        plan = row[0]
        run, token = int(plan["run_id"]), str(plan["lease_token"])
        assert MARKER in json.dumps(plan), "the plan handed to the worker holds the text"
        listener.execute("LISTEN ember_cancel")

        with psycopg.connect(db) as host:
            forgot = host.execute(
                "SELECT ember.forget_thread('default', 's1', 'the user asked')"
            ).fetchone()
            assert list(listener.notifies(timeout=0.2)) == [], "nothing is announced before commit"
            host.commit()
        assert forgot is not None and forgot[0]["runs_cancelled"] == [run]

        notes = list(listener.notifies(timeout=10, stop_after=1))
        assert [(n.channel, n.payload) for n in notes] == [("ember_cancel", str(run))]

        # The worker, not yet aware, submits what its model said, quoting the erased text.
        outcome = {
            "status": "completed",
            "error": None,
            "usage": {
                "input_tokens": 100,
                "cache_read_input_tokens": 0,
                "cache_creation_5m_input_tokens": 0,
                "cache_creation_1h_input_tokens": 0,
                "output_tokens": 20,
            },
            "latency_ms": 500,
            "proposals": [
                {
                    "text": f"The alarm code is {MARKER}.",
                    "evidence_kind": "user-stated",
                    "evidence": [{"message_id": secret}],
                }
            ],
        }
        result = worker.execute(
            "SELECT ember.submit_shadow_run('default', %s, %s::uuid, %s)",
            (run, token, Jsonb(outcome)),
        ).fetchone()
        worker.commit()
        assert result is not None

    with psycopg.connect(db) as check:
        state = check.execute(
            "SELECT status, (SELECT count(*) FROM ember.shadow_proposals WHERE run_id = %s) "
            "FROM ember.shadow_runs WHERE id = %s",
            (run, run),
        ).fetchone()
        assert state == ("cancelled", 0)
        assert marker_hits(check, MARKER) == {}
        # The search itself finds things: the thread's title-free rows are tombstones now.
        assert marker_hits(check, "[forgotten]") == {"messages.content": 2}
