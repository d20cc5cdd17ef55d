"""A claim locks the model row it routes to and checks its tags again (issue 8, item 9).

What a single pgTAP transaction cannot show: a tag removal in another session that commits
while a claim is between choosing the model and writing its plan.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg

from pgwait import blocked_on_lock

UNTAG = "UPDATE ember.models SET tags = '{}' WHERE id = 'claude-haiku-4-5'"


def _setup(url: str) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("SELECT ember.define_category('health')")
        conn.execute("UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-haiku-4-5'")
        conn.execute("SELECT ember.create_thread('default', 'main', 'main')")
        conn.execute("SELECT ember.shadow_activate()")
        conn.execute("SELECT ember.create_thread('default', 'knee', 'side', 'Knee', 'health')")
        conn.execute(
            "SELECT ember.append_message('default', 'knee', 'user', 'My knee hurts after runs.')"
        )
        conn.execute("SELECT ember.shadow_memory_changed('default', 'knee', 'task-ended')")


def test_a_tag_removed_during_a_claim_never_reaches_the_plan(db: str) -> None:
    _setup(db)
    with (
        psycopg.connect(db, application_name="untagger") as untagger,
        psycopg.connect(db, application_name="claimer") as claimer,
    ):
        # The untagger holds the model row: its tag removal is not committed yet, so the
        # claim's snapshot still routes the health thread to the light model.
        untagger.execute(UNTAG)
        result: list[Any] = []
        errors: list[BaseException] = []

        def claim() -> None:
            try:
                claimer.execute("SET lock_timeout = '20s'")
                row = claimer.execute("SELECT ember.claim_shadow_run('w', '5 minutes')").fetchone()
                result.append(row[0] if row else None)
                claimer.commit()
            except BaseException as exc:  # asserted below
                errors.append(exc)
                claimer.rollback()

        t = threading.Thread(target=claim)
        t.start()
        assert blocked_on_lock(db, "claimer"), "the claim waits for the model row it routes to"
        untagger.commit()
        t.join(30)
        assert errors == []
        assert result == [None], "the model lost its tag: no plan is handed to it"
        count = claimer.execute("SELECT count(*) FROM ember.shadow_runs").fetchone()
        assert count == (0,)
        ready = claimer.execute(
            "SELECT model, waiting_for IS NOT NULL FROM ember.shadow_ready()"
            " WHERE thread_id = 'knee'"
        ).fetchone()
        assert ready == (None, True), "the work waits for a tagged model and says why"


def test_a_tag_removal_waits_for_a_claim_and_then_is_refused(db: str) -> None:
    _setup(db)
    with (
        psycopg.connect(db, application_name="claimer") as claimer,
        psycopg.connect(db, application_name="untagger") as untagger,
    ):
        plan = claimer.execute("SELECT ember.claim_shadow_run('w', '5 minutes')").fetchone()
        assert plan is not None and plan[0]["model"] == "claude-haiku-4-5"
        errors: list[BaseException] = []

        def untag() -> None:
            try:
                untagger.execute("SET lock_timeout = '20s'")
                untagger.execute(UNTAG)
                untagger.commit()
            except BaseException as exc:  # asserted below
                errors.append(exc)
                untagger.rollback()

        t = threading.Thread(target=untag)
        t.start()
        assert blocked_on_lock(db, "untagger"), "the tag removal waits for the claim's share lock"
        claimer.commit()
        t.join(30)
        assert len(errors) == 1
        assert isinstance(errors[0], psycopg.Error) and errors[0].sqlstate == "EM022"
