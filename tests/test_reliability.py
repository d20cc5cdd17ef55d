"""The reliability suite: attacks on Ember as an adversary would make them, with real processes
where a process is the point, each recording its figures in the ledger (tests/reliability.py)
that docs/reliability.md is written from.

Bounded in time: the interleavings and the hostile outputs run in SQL against one database, the
worker scenarios use short leases and wait on events, never on fixed sleeps.
"""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

from ember.sim import Hang, Scripted, SimServer
from ember.worker.calls import without_nul
from ember.worker.shadow import ShadowPipeline
from reliability import record
from workerkit import API_KEY, InProcessContext, WorkerProcess, as_role, host_on, offer_cold

USAGE = {
    "input_tokens": 1,
    "cache_read_input_tokens": 0,
    "cache_creation_5m_input_tokens": 0,
    "cache_creation_1h_input_tokens": 0,
    "output_tokens": 1,
}


def _outcome(proposals: list[Any]) -> Jsonb:
    return Jsonb(
        {
            "status": "completed",
            "error": None,
            "usage": USAGE,
            "latency_ms": 1,
            "proposals": proposals,
        }
    )


def _one(conn: psycopg.Connection[Any], sql: str, *args: Any) -> Any:
    row = conn.execute(sql, args).fetchone()
    assert row is not None
    return row[0]


# --- roles ---


def test_no_role_reaches_a_table_directly(db: str) -> None:
    attempts = 0
    with psycopg.connect(db, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_class AS c WHERE c.relnamespace = 'ember'::regnamespace"
                " AND c.relkind IN ('r', 'p') ORDER BY 1"
            ).fetchall()
        ]
    assert len(tables) > 20
    for role in ("ember_host", "ember_worker", "ember_analyst"):
        with psycopg.connect(as_role(db, role), autocommit=True) as conn:
            for table in tables:
                for stmt in (
                    f"SELECT 1 FROM ember.{table} LIMIT 1",
                    f"DELETE FROM ember.{table}",
                    f"TRUNCATE ember.{table}",
                    f"INSERT INTO ember.{table} DEFAULT VALUES",
                ):
                    with pytest.raises(psycopg.errors.InsufficientPrivilege):
                        conn.execute(stmt)
                    attempts += 1
            # The flags Ember's own functions set open nothing to a role without privileges.
            conn.execute("SELECT set_config('ember.inserting_message', 'on', false)")
            conn.execute("SELECT set_config('ember.erasing', 'on', false)")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("DELETE FROM ember.messages")
            attempts += 1
    record(
        "role-confined",
        f"SELECT, DELETE, TRUNCATE and INSERT on each of {len(tables)} tables as each role,"
        " and a delete with the erasing flag set",
        attempts,
        "0 rows read or written",
        "tests/test_reliability.py",
    )


# --- cancellation ---


def test_human_messages_interleaved_with_claims_and_submits(db: str) -> None:
    """Seeded interleavings: two runs out at once, a human message on one thread at a random
    point. A run whose thread got the message while it was out ends cancelled with no
    proposals; every other run completes with its proposal."""
    rng = random.Random(29)
    rounds = 500
    cancelled = completed = 0
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT ember.create_thread('default', 'main', 'main')")
        conn.execute("SELECT ember.shadow_activate(now() - interval '1 hour')")
        for i in range(rounds):
            threads = [f"a{i}", f"b{i}"]
            said: dict[str, int] = {}
            for t in threads:
                conn.execute("SELECT ember.create_thread('default', %s, 'side')", (t,))
                said[t] = _one(
                    conn,
                    "SELECT ember.append_message('default', %s, 'user', %s, 'human')",
                    t,
                    f"I like {t}.",
                )
                conn.execute(
                    "SELECT ember.append_message('default', %s, 'assistant', 'Noted.')", (t,)
                )
                conn.execute("SELECT ember.task_ended('default', %s)", (t,))
            plans = [
                _one(conn, "SELECT ember.claim_shadow_run('w', '10 minutes')") for _ in threads
            ]
            assert all(plans), f"round {i}: both threads are claimed"
            by_thread = {p["thread_id"]: p for p in plans}
            assert set(by_thread) == set(threads)
            # Steps: submit a, submit b, in a random order; the message lands before, between or
            # after them, or not at all.
            order = threads[:]
            rng.shuffle(order)
            victim = rng.choice([*threads, None])
            at = rng.randrange(3)
            interrupted: set[str] = set()
            for step in range(3):
                if victim is not None and step == at:
                    conn.execute(
                        "SELECT ember.append_message("
                        "'default', %s, 'user', 'Wait, stop.', 'human')",
                        (victim,),
                    )
                    interrupted |= {t for t in order[step:] if t == victim}
                if step < 2:
                    t = order[step]
                    plan = by_thread[t]
                    proposal = {
                        "text": f"The user likes {t}.",
                        "evidence_kind": "user-stated",
                        "evidence": [{"message_id": said[t]}],
                    }
                    result = _one(
                        conn,
                        "SELECT ember.submit_shadow_run('default', %s, %s, %s)",
                        plan["run_id"],
                        plan["lease_token"],
                        _outcome([proposal]),
                    )
                    expect = "cancelled" if t in interrupted else "completed"
                    assert result["status"] == expect, (i, t, victim, at, order)
            for t in threads:
                status, count = conn.execute(
                    "SELECT r.status, (SELECT count(*) FROM ember.shadow_proposals AS p"
                    " WHERE p.run_id = r.id) FROM ember.shadow_runs AS r WHERE r.thread_id = %s",
                    (t,),
                ).fetchone() or (None, None)
                if t in interrupted:
                    assert (status, count) == ("cancelled", 0)
                    cancelled += 1
                else:
                    assert (status, count) == ("completed", 1)
                    completed += 1
        assert _one(conn, "SELECT count(*) FROM ember.shadow_runs WHERE status = 'running'") == 0
    record(
        "interleave",
        f"{rounds} seeded rounds of two runs out at once; {cancelled} runs got a human message"
        f" while out and ended cancelled with 0 proposals, {completed} others completed",
        rounds,
        "0 proposals of a cancelled run; 0 other runs affected",
        "tests/test_reliability.py",
    )


# --- crashes ---


def test_kill_minus_nine_during_a_call_and_another_worker_finishes(db: str) -> None:
    with host_on(db) as host:
        host.create_thread("main", "main")
        host.conn.execute("SELECT ember.shadow_activate()")
        host.create_thread("t1", "side")
    with SimServer(responder=Scripted([lambda _: Hang()])) as sim:
        first = WorkerProcess(db, sim.base_url, "--lease", "3", "--tick-interval", "1").ready()
        try:
            offer_cold(db, "t1", "I prefer tea.")
            sim.wait_for_requests(1, timeout=30)
            first.kill()  # SIGKILL: no release, no submit; the lease must lapse
        finally:
            if first.proc.poll() is None:
                first.kill()
        sim.reset(responder="heuristic")
        second = WorkerProcess(
            db, sim.base_url, "--lease", "3", "--tick-interval", "1", name="w2"
        ).ready()
        try:
            (done,) = second.wait_for("run_finished", timeout=60)
            assert done["status"] == "completed"
            assert second.stop() == 0
        finally:
            if second.proc.poll() is None:
                second.kill()
    with psycopg.connect(db, autocommit=True) as conn:
        rows = conn.execute("SELECT status, error FROM ember.shadow_runs ORDER BY id").fetchall()
    assert rows == [("abandoned", "lease expired"), ("completed", None)]
    record(
        "kill-mid-call",
        "worker killed with SIGKILL while its call hung; the lease lapsed, tick abandoned the run"
        " and a second worker completed the thread",
        1,
        "0 threads left undone; 0 leases left running",
        "tests/test_reliability.py",
    )


# --- the model endpoint ---


@pytest.mark.parametrize("responder", ["rate-limit:0", "server-error", "overloaded", "truncated"])
def test_endpoint_faults_fail_the_run_with_the_reason(db: str, responder: str) -> None:
    with host_on(db) as host:
        host.create_thread("main", "main")
        host.conn.execute("SELECT ember.shadow_activate()")
        host.create_thread("t1", "side")
    offer_cold(db, "t1", "I prefer tea.")

    async def go(base_url: str) -> None:
        pipeline = ShadowPipeline()
        async with await psycopg.AsyncConnection.connect(as_role(db), autocommit=True) as conn:
            job = await pipeline.claim(conn, "test", timedelta(minutes=5))
        assert job is not None
        ctx = InProcessContext(db, base_url)
        try:
            await pipeline.execute(job, ctx)
        finally:
            await ctx.client.close()

    with SimServer(responder=responder) as sim:
        asyncio.run(asyncio.wait_for(go(sim.base_url), 60))
    with psycopg.connect(db, autocommit=True) as conn:
        status, error = conn.execute("SELECT status, error FROM ember.shadow_runs").fetchone() or (
            None,
            None,
        )
        assert _one(conn, "SELECT count(*) FROM ember.shadow_proposals") == 0
    assert status == "failed" and error, (status, error)
    _FAULTS.append(responder)
    if len(_FAULTS) == 4:
        record(
            "endpoint-faults",
            "one shadow run per fault (429, 500, 529, a body cut short), the SDK's retries off",
            len(_FAULTS),
            "0 runs left running; each failed with the endpoint's reason",
            "tests/test_reliability.py",
        )


_FAULTS: list[str] = []


# --- hostile model output ---

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
_PROPOSAL = _JSON | st.fixed_dictionaries(
    {"text": _JSON, "evidence_kind": _JSON | st.sampled_from(["user-stated", "tool-verified"])},
    optional={
        "evidence": _JSON | st.lists(st.fixed_dictionaries({"message_id": _JSON}), max_size=3)
    },
)
_HOSTILE = settings(
    max_examples=150,
    deadline=None,
    database=None,
    derandomize=True,  # the same examples every run, so the page's figures repeat
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def test_hostile_shadow_proposals_are_stored_or_rejected_never_an_error(db: str) -> None:
    seen = {"runs": 0, "proposals": 0}
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT ember.create_thread('default', 'main', 'main')")
        conn.execute("SELECT ember.shadow_activate(now() - interval '1 hour')")
        conn.execute("SELECT ember.create_thread('default', 't', 'side')")

        @_HOSTILE
        @given(st.lists(_PROPOSAL, max_size=6))
        def one(proposals: list[Any]) -> None:
            conn.execute(
                "SELECT ember.append_message('default', 't', 'user', 'I prefer tea.', 'human')"
            )
            conn.execute("SELECT ember.task_ended('default', 't')")
            plan = _one(conn, "SELECT ember.claim_shadow_run('w', '10 minutes')")
            assert plan is not None
            # As the worker sends them: NUL and lone surrogates replaced where answers enter.
            clean = without_nul(proposals)
            result = _one(
                conn,
                "SELECT ember.submit_shadow_run('default', %s, %s, %s)",
                plan["run_id"],
                plan["lease_token"],
                _outcome(clean),
            )
            assert result["status"] == "completed" and result["proposals"] == len(clean)
            seen["runs"] += 1
            seen["proposals"] += len(clean)

        one()
        assert _one(conn, "SELECT count(*) FROM ember.shadow_runs WHERE status <> 'completed'") == 0
    record(
        "hostile-shadow",
        f"hypothesis: {seen['proposals']} arbitrary JSON values as proposals over"
        f" {seen['runs']} submits; each stored, valid or rejected with its reason",
        seen["runs"],
        "0 submits refused; 0 runs left running",
        "tests/test_reliability.py",
    )


def _steward_run(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    conn.execute(
        "SELECT ember.create_thread("
        "'default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5')"
    )
    conn.execute("SELECT ember.ensure_steward_thread('default')")
    conn.execute(
        "UPDATE ember.settings SET value = '\"0 seconds\"' WHERE key = 'idle_before_digest'"
    )
    conn.execute("UPDATE ember.settings SET value = '1000' WHERE key = 'steward_max_rounds'")
    conn.execute("SELECT ember.create_thread('default', 'trip', 'side')")
    conn.execute(
        "SELECT ember.append_message("
        "'default', 'trip', 'user', 'I prefer tea over coffee.', 'human')"
    )
    conn.execute("SELECT ember.task_ended('default', 'trip')")
    plan = _one(conn, "SELECT ember.claim_steward_run('w', '1 hour')")
    assert plan is not None
    return dict(plan)


def _step(conn: psycopg.Connection[Any], plan: dict[str, Any], blocks: list[Any]) -> dict[str, Any]:
    return dict(
        _one(
            conn,
            "SELECT ember.steward_step('default', %s, %s, %s)",
            plan["run_id"],
            plan["lease_token"],
            Jsonb({"content": blocks, "usage": {"input_tokens": 1, "output_tokens": 1}}),
        )
    )


def test_hostile_steward_tool_calls_are_answered_never_a_failed_step(db: str) -> None:
    seen = {"steps": 0, "calls": 0, "errors": 0, "applied": 0}
    counter = iter(range(10**9))
    # finish is left out: a valid one would end the run the examples share.
    names = st.sampled_from(
        ["write_fact", "merge_facts", "retire_fact", "search_memory"]
    ) | st.text(max_size=20)
    with psycopg.connect(db, autocommit=True) as conn:
        plan = _steward_run(conn)
        tea = _one(
            conn, "SELECT id FROM ember.messages WHERE content = 'I prefer tea over coffee.'"
        )
        # Arbitrary calls, and well-formed ones with arbitrary text, so some are applied.
        written = st.fixed_dictionaries(
            {
                "name": st.just("write_fact"),
                "input": st.fixed_dictionaries(
                    {
                        "text": st.text(min_size=1, max_size=80),
                        "evidence_kind": st.just("user-stated"),
                        "evidence": st.just([{"message_id": tea}]),
                    }
                ),
            }
        )
        searched = st.fixed_dictionaries(
            {
                "name": st.just("search_memory"),
                "input": st.fixed_dictionaries({"query": st.text(max_size=80)}),
            }
        )
        call = st.fixed_dictionaries({"name": names, "input": _JSON}) | written | searched

        @_HOSTILE
        @given(st.lists(call, max_size=5), st.text(max_size=60))
        def one(calls: list[dict[str, Any]], text: str) -> None:
            blocks: list[Any] = [{"type": "text", "text": text}]
            for c in calls:
                blocks.append({"type": "tool_use", "id": f"h{next(counter)}", **c})
            result = _step(conn, plan, without_nul(blocks))
            assert result["status"] == "running"
            assert len(result["results"]) == len(calls)
            seen["steps"] += 1
            seen["calls"] += len(calls)
            seen["errors"] += sum(1 for r in result["results"] if r["is_error"])
            seen["applied"] += sum(1 for r in result["results"] if not r["is_error"])

        one()
    record(
        "hostile-steward",
        f"hypothesis: {seen['calls']} tool calls of arbitrary names and inputs over"
        f" {seen['steps']} steps; {seen['errors']} answered as errors, {seen['applied']} applied",
        seen["steps"],
        "0 failed steps",
        "tests/test_reliability.py",
    )


def test_thousands_of_calls_and_huge_texts_are_bounded(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        plan = _steward_run(conn)
        tea = _one(
            conn, "SELECT id FROM ember.messages WHERE content = 'I prefer tea over coffee.'"
        )
        calls: list[dict[str, Any]] = [
            {
                "type": "tool_use",
                "id": f"w{i}",
                "name": "write_fact",
                "input": {
                    "text": f"The user prefers tea, note {i}.",
                    "evidence_kind": "user-stated",
                    "evidence": [{"message_id": tea}],
                },
            }
            for i in range(2_000)
        ]
        big = "tea " * 1_000_000
        result = _step(conn, plan, calls)
        assert len(result["results"]) == 2_000 and result["status"] == "running"
        applied = sum(1 for r in result["results"] if not r["is_error"])
        assert applied == 100
        huge = _step(
            conn,
            plan,
            [
                {
                    "type": "tool_use",
                    "id": "big-fact",
                    "name": "write_fact",
                    "input": {
                        "text": big,
                        "evidence_kind": "user-stated",
                        "evidence": [{"message_id": tea}],
                    },
                },
                {
                    "type": "tool_use",
                    "id": "big-query",
                    "name": "search_memory",
                    "input": {"query": big},
                },
            ],
        )
        assert [r["is_error"] for r in huge["results"]] == [True, True]
        largest = _one(
            conn,
            "SELECT max(octet_length(content)) FROM ember.messages"
            " WHERE thread_id = 'memory-steward' AND role = 'tool_result'",
        )
        assert largest < 2000
        conn.execute("SELECT ember.create_thread('default', 't', 'side')")
        conn.execute("SELECT ember.shadow_activate(now() - interval '1 hour')")
        mid = _one(
            conn, "SELECT ember.append_message('default', 't', 'user', 'I like jazz.', 'human')"
        )
        conn.execute("SELECT ember.task_ended('default', 't')")
        splan = _one(conn, "SELECT ember.claim_shadow_run('w', '10 minutes')")
        proposals = [
            {
                "text": f"The user likes jazz ({i}).",
                "evidence_kind": "user-stated",
                "evidence": [{"message_id": mid}],
            }
            for i in range(2_000)
        ] + [{"text": big, "evidence_kind": "user-stated", "evidence": [{"message_id": mid}]}]
        out = _one(
            conn,
            "SELECT ember.submit_shadow_run('default', %s, %s, %s)",
            splan["run_id"],
            splan["lease_token"],
            _outcome(proposals),
        )
        assert out["status"] == "completed" and out["valid"] == 100
        longest = _one(conn, "SELECT max(length(text)) FROM ember.shadow_proposals")
        assert longest < 2100
    record(
        "bounds",
        "one steward response of 2,000 write_fact calls (100 applied, the rest error results);"
        " a 4 MB fact and a 4 MB query (error results); a shadow run of 2,001 proposals"
        " (100 valid, the 4 MB one kept shortened)",
        4_003,
        "0 failed steps or submits; largest tool-result row under 2 kB",
        "tests/test_reliability.py",
    )


# --- leaks ---


def test_the_leak_audit_of_every_request_after_both_pipelines(db: str) -> None:
    with host_on(db) as host:
        host.create_thread("main", "main")
        host.conn.execute("SELECT ember.set_thread_model('default', 'main', 'claude-sonnet-4-6')")
        host.conn.execute("SELECT ember.ensure_steward_thread('default')")
        host.conn.execute("SELECT ember.shadow_activate()")
        host.conn.execute("SELECT ember.define_category('health')")
        host.conn.execute("UPDATE ember.models SET tags = '{health}' WHERE id = 'claude-haiku-4-5'")
        host.conn.execute(
            "UPDATE ember.settings SET value = '\"0 seconds\"' WHERE key = 'idle_before_digest'"
        )
        host.create_thread("open", "side")
        host.create_thread("vault", "side", seal_tier="isolated")
        host.create_thread("clinic", "side", category="health")
        for thread, canary in (
            ("open", "CANARY-OPEN-29"),
            ("vault", "CANARY-ISOLATED-29"),
            ("clinic", "CANARY-HEALTH-29"),
        ):
            host.append_message(thread, "user", f"I prefer tea, {canary}.", author="human")
            host.append_message(thread, "assistant", f"Noted {canary}.")
            host.task_ended(thread)
    with SimServer(responder="heuristic") as sim:
        w = WorkerProcess(
            db, sim.base_url, "--pipelines", "shadow,steward", "--tick-interval", "1"
        ).ready()
        try:
            w.wait_for("run_finished", lambda e: e.get("pipeline") == "steward", timeout=90)
            w.wait_for("run_finished", lambda e: e.get("pipeline") == "shadow", count=2, timeout=90)
            assert w.stop() == 0
        finally:
            if w.proc.poll() is None:
                w.kill()
        requests = list(sim.requests)
    with psycopg.connect(db, autocommit=True) as conn:
        tagged = {
            r[0] for r in conn.execute("SELECT id FROM ember.models WHERE 'health' = ANY (tags)")
        }
    isolated = labelled_untagged = opened = health = 0
    for req in requests:
        body = req.raw.decode(errors="replace")
        model = (req.body or {}).get("model")
        isolated += "CANARY-ISOLATED-29" in body
        if "CANARY-HEALTH-29" in body:
            health += 1
            labelled_untagged += model not in tagged
        opened += "CANARY-OPEN-29" in body
    assert opened >= 2, "both pipelines read the open thread: the audit is not vacuous"
    assert health >= 1, "the health thread reached its tagged model"
    assert (isolated, labelled_untagged) == (0, 0)
    record(
        "leak-audit",
        f"{len(requests)} requests from the shadow and steward pipelines over an open, an"
        f" isolated and a health thread; open content in {opened}, health content in {health}",
        len(requests),
        "0 with isolated content; 0 with labelled content to an untagged model",
        "tests/test_reliability.py",
    )
    lines = w.output.splitlines()
    assert API_KEY not in w.output
    in_bodies = sum(API_KEY in r.raw.decode(errors="replace") for r in requests)
    assert in_bodies == 0
    record(
        "secrets",
        f"the API key looked for in {len(lines)} worker log lines and {len(requests)} request"
        " bodies (it travels only in the x-api-key header)",
        len(lines) + len(requests),
        "0 occurrences",
        "tests/test_reliability.py",
    )
