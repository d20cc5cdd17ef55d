"""The consolidation job end to end: one `ember worker` running the shadow, steward and
consolidation pipelines against `ember sim`, over the real database.

The steward writes facts from two threads, a third thread is cut over so shadow writes its facts
by promotion, and the consolidation job then sees what no single thread can: the same deploy
verified in two threads (merged, with the evidence of both), a user who moved from Berlin to
Lisbon (the older fact superseded, its validity closed), and a liking and a dislike of jazz
(flagged for a person). The SQL rules themselves are in pgtap/100_consolidation.sql.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ember.sim import Heuristic, SimServer
from workerkit import EMBER, WorkerProcess, host_on

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(name="sim")
def _sim() -> Iterator[SimServer]:
    # The heuristic responder words the steward's facts in its own voice ("Verified by bash: ...")
    # and shadow's in another ("Tool bash succeeded: ..."), as two models would: the same deploy
    # is then two facts that only consolidation can see are one.
    with SimServer(responder=Heuristic()) as server:
        yield server


def _query(url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, args or None).fetchall()  # type: ignore[arg-type]


def _until(url: str, sql: str, *, timeout: float = 90.0) -> None:
    """Poll until the query returns true (the state the worker converges to); fail on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _query(url, sql)[0][0]:
            return
        time.sleep(0.3)
    facts = _query(url, "SELECT id, status, evidence_kind, text FROM ember.facts ORDER BY id")
    actions = _query(
        url, "SELECT run_id, action, fact_ids, status, error FROM ember.consolidation_actions"
    )
    runs = _query(url, "SELECT id, labels, status, error FROM ember.consolidation_runs")
    raise AssertionError(
        f"not reached within {timeout}s: {sql}\nfacts {facts}\nactions {actions}\nruns {runs}"
    )


def test_three_pipelines_in_one_worker_consolidate_across_threads(db: str, sim: SimServer) -> None:
    with host_on(db) as host:
        host.create_thread("main", "main")
        host.conn.execute("SELECT ember.set_thread_model('default', 'main', 'claude-haiku-4-5')")
        host.conn.execute("SELECT ember.ensure_steward_thread('default')")
        host.conn.execute("SELECT ember.shadow_activate()")
        for key in ("idle_before_digest", "consolidation_interval"):
            value = "0 seconds"
            host.conn.execute("SELECT ember.set_setting(%s, %s)", (key, value))
        for thread in ("home", "ops", "ops2", "music"):
            host.create_thread(thread, "side")
        host.conn.execute("SELECT ember.cut_over('thread', 'ops2', 'test')")
        host.append_message("home", "user", "I am based in Berlin.", author="human")
        deploy = {"tool_call_id": "c1", "tool_name": "bash", "tool_status": "ok"}
        host.append_message("ops", "tool_result", "deploy of v2.3 succeeded", **deploy)
        host.append_message("ops2", "tool_result", "deploy of v2.3 succeeded", **deploy)
        host.append_message("music", "user", "I like jazz.", author="human")
        host.append_message("music", "user", "I hate jazz.", author="human")
        host.append_message("home", "user", "I am based in Lisbon.", author="human")
        for thread in ("home", "ops", "ops2", "music"):
            host.task_ended(thread)

    worker = WorkerProcess(
        db,
        sim.base_url,
        "--pipelines",
        "shadow,steward,consolidation",
        "--poll-interval",
        "1",
        env={
            "EMBER_EMBEDDER": "hashembed:HashEmbedder",
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(ROOT / "tests"), os.environ.get("PYTHONPATH")])
            ),
        },
    ).ready()
    try:
        _until(
            db,
            "SELECT EXISTS (SELECT 1 FROM ember.facts WHERE status = 'superseded')"
            " AND EXISTS (SELECT 1 FROM ember.consolidation_actions WHERE action = 'merge'"
            "             AND status = 'applied')"
            " AND EXISTS (SELECT 1 FROM ember.review_queue)",
        )
        finished = {e.get("pipeline") for e in worker.events if e.get("event") == "run_finished"}
        assert {"shadow", "steward", "consolidation"} <= finished, "all three ran in one worker"
    finally:
        assert worker.stop() == 0

    # Berlin superseded by Lisbon: closed at Lisbon's start, kept in history with the reason.
    (berlin, lisbon, until, lisbon_from) = _query(
        db,
        "SELECT o.status, n.status, o.valid_until, n.valid_from FROM ember.facts AS o"
        " JOIN ember.facts AS n ON n.id = o.superseded_by WHERE o.text LIKE %s",
        "%Berlin%",
    )[0]
    assert (berlin, lisbon) == ("superseded", "active")
    assert until == lisbon_from
    (detail, run) = _query(
        db,
        "SELECT h.detail, h.consolidation_run_id FROM ember.fact_history AS h"
        " JOIN ember.facts AS f ON f.id = h.fact_id"
        " WHERE f.text LIKE %s AND h.change = 'superseded'",
        "%Berlin%",
    )[0]
    assert "Berlin" in detail and "Lisbon" in detail and run is not None

    # The deploy, verified in the steward's thread and in the cut-over one, is one fact now,
    # holding the evidence of both.
    (threads, kinds, sources) = _query(
        db,
        "SELECT array_agg(DISTINCT m.thread_id ORDER BY m.thread_id),"
        " array_agg(DISTINCT f.evidence_kind),"
        " (SELECT array_agg(s.cutover_id IS NOT NULL ORDER BY s.id) FROM ember.facts AS s"
        "  WHERE s.merged_into = f.id)"
        " FROM ember.consolidation_actions AS a JOIN ember.facts AS f ON f.id = a.result_fact"
        " JOIN ember.fact_evidence AS e ON e.fact_id = f.id"
        " JOIN ember.messages AS m ON m.id = e.message_id"
        " WHERE a.action = 'merge' AND a.status = 'applied' GROUP BY f.id",
    )[0]
    assert threads == ["ops", "ops2"]
    assert kinds == ["tool-verified"]
    assert sorted(sources) == [False, True], "one steward fact and one promoted fact were merged"

    # The jazz contradiction waits for a person, once, however often the job ran.
    queue = _query(db, "SELECT item, confidence FROM ember.review_queue")
    assert [q[0] for q in queue] == ["contradiction"]
    assert float(queue[0][1]) < 0.7

    # The consolidation runs are priced and timed like the other pipelines' runs.
    (runs, tokens, priced) = _query(
        db,
        "SELECT count(*), min(input_tokens + output_tokens), bool_and(price_input IS NOT NULL)"
        " FROM ember.consolidation_runs WHERE status = 'completed'",
    )[0]
    assert runs >= 1 and tokens > 0 and priced

    # The queue is in `ember compare`'s report, and a decision is recorded with who and when.
    def report() -> dict[str, Any]:
        done = subprocess.run(
            [EMBER, "compare", "--json"],
            env={**os.environ, "DATABASE_URL": db},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return dict(json.loads(done.stdout))

    queued = report()["review_queue"]
    assert [(q["item"], q["review"]) for q in queued] == [("contradiction", None)]
    assert any("jazz" in f["text"] for f in queued[0]["facts"])
    _query(
        db,
        "SELECT ember.review_consolidation_action(%s, 'reject', 'ana', 'both hold at times')",
        queued[0]["action_id"],
    )
    decided = report()["review_queue"]
    assert [(q["review"], q["reviewed_by"]) for q in decided] == [("rejected", "ana")]
    assert decided[0]["reviewed_at"] is not None
    assert _query(db, "SELECT count(*) FROM ember.review_queue")[0][0] == 0
