"""The memory steward end to end: the real SDK against `ember sim`, the real database.

A wake claims the backlog, the model (ember.sim.steward.StewardStandIn, a rule-based stand-in
that reads the rendered rows the way the heuristic responder does) writes facts through the
steward's tools over two rounds, and `finish` marks the digested rows. The SQL rules themselves
are tested in pgtap/05x_steward_*.sql; these tests check that the worker's round loop drives
them correctly over real HTTP.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from ember.embed import load_embedder
from ember.sim import Reply, Scripted, SimServer
from ember.sim.responders import SimRequest, new_tool_use_id
from ember.sim.steward import StewardStandIn
from ember.tools import STEWARD_TOOLS, steward_tool_definitions
from ember.worker.steward import StewardPipeline, steward_prompt, vector_literal
from workerkit import InProcessContext, WorkerProcess, host_on

ROOT = Path(__file__).resolve().parents[1]


class Looping:
    """A model that never finishes: it searches memory every round."""

    name = "looping"

    async def respond(self, request: SimRequest) -> Reply:
        return Reply.tool_use("search_memory", {"query": "anything"})


@pytest.fixture(name="steward_sim")
def _steward_sim() -> Iterator[SimServer]:
    with SimServer(responder=StewardStandIn()) as server:
        yield server


def _backlog(url: str, *, shadow: bool = False) -> dict[str, int]:
    """main, a steward, two side threads with rows idle long enough to digest; their ids."""
    with host_on(url) as host:
        host.create_thread("main", "main")
        if shadow:
            host.conn.execute("SELECT ember.shadow_activate()")
        host.conn.execute("SELECT ember.set_thread_model('default', 'main', 'claude-haiku-4-5')")
        host.conn.execute("SELECT ember.ensure_steward_thread('default')")
        host.conn.execute(
            "UPDATE ember.settings SET value = '\"0 seconds\"' WHERE key = 'idle_before_digest'"
        )
        host.create_thread("trip", "side")
        host.create_thread("ops", "side")
        ids = {
            "tea": host.append_message("trip", "user", "I prefer tea over coffee.", author="human"),
            "question": host.append_message("trip", "user", "Is Rome warm in May?", author="human"),
            "answer": host.append_message("trip", "assistant", "Usually around 22 degrees."),
            "deploy": host.append_message(
                "ops",
                "tool_result",
                "deploy of v2.3 succeeded",
                tool_call_id="c1",
                tool_name="bash",
                tool_status="ok",
            ),
            "calls": host.append_message(
                "main", "user", "From now on never call me before 9.", author="human"
            ),
        }
    return ids


async def _wake(url: str, base_url: str, pipeline: StewardPipeline | None = None) -> dict[str, Any]:
    pipeline = pipeline or StewardPipeline()
    ctx = InProcessContext(url, base_url)
    async with ctx.connection() as conn:
        job = await pipeline.claim(conn, "test", timedelta(minutes=5))
    assert job is not None
    await pipeline.execute(job, ctx)
    return {"job": job, "ctx": ctx}


def _query(url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()  # type: ignore[arg-type]


def test_a_wake_writes_facts_with_valid_evidence_and_marks_exactly_what_it_digested(
    db: str, steward_sim: SimServer
) -> None:
    ids = _backlog(db)
    done = asyncio.run(_wake(db, steward_sim.base_url))
    run_id = done["job"].run_id

    (status, rounds, digested, input_tokens) = _query(
        db, "SELECT status, rounds, digested_rows, input_tokens FROM ember.steward_runs"
    )[0]
    assert (status, rounds) == ("completed", 2)
    assert input_tokens > 0

    facts = _query(
        db,
        "SELECT f.text, f.evidence_kind, jsonb_agg(jsonb_build_object('message_id', e.message_id))"
        " FROM ember.facts AS f JOIN ember.fact_evidence AS e ON e.fact_id = f.id"
        " GROUP BY f.tenant_id, f.id ORDER BY f.id",
    )
    texts = {t for t, _, _ in facts}
    assert any("tea over coffee" in t for t in texts)
    assert any("never call me before 9" in t for t in texts)
    assert any("deploy of v2.3 succeeded" in t for t in texts)
    assert not any("Rome" in t for t in texts), "a question is not a fact"
    for _, kind, evidence in facts:
        (reason,) = _query(
            db, "SELECT ember.check_evidence(NULL, %s, %s, false)", kind, Jsonb(evidence)
        )[0]
        assert reason is None

    marked = {
        r[0]
        for r in _query(
            db,
            "SELECT m.id FROM ember.messages AS m JOIN ember.steward_runs AS r"
            " ON m.episode_id = r.episode_id WHERE r.id = %s",
            run_id,
        )
    }
    assert marked == set(ids.values())
    assert digested == len(ids)
    (left,) = _query(db, "SELECT count(*) FROM ember.backlog")[0]
    assert left == 0

    # The steward's calls carry only its prompt and only its tools.
    brain: StewardStandIn = steward_sim.state.responder  # type: ignore[attr-defined]
    for body in brain.requests:
        assert [b["text"] for b in body["system"]] == [steward_prompt()]
        assert [t["name"] for t in body["tools"]] == list(STEWARD_TOOLS)
        assert body["tools"] == steward_tool_definitions()
    # The second round's request carries the first round's tool results.
    second = brain.requests[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert all(b["type"] == "tool_result" for b in second[2]["content"])

    # Everything the model saw and did is in the steward's thread.
    roles = [
        r[0]
        for r in _query(
            db,
            "SELECT role FROM ember.messages WHERE thread_id = 'memory-steward' ORDER BY seq",
        )
    ]
    assert roles[:2] == ["user", "assistant"]
    assert roles.count("assistant") == 2


def test_a_failing_run_marks_nothing(db: str, steward_sim: SimServer) -> None:
    _backlog(db)
    steward_sim.reset(responder="server-error")
    asyncio.run(_wake(db, steward_sim.base_url))
    (status, error) = _query(db, "SELECT status, error FROM ember.steward_runs")[0]
    assert status == "failed"
    assert error == "http 500 api_error"
    (marked,) = _query(db, "SELECT count(*) FROM ember.messages WHERE episode_id IS NOT NULL")[0]
    assert marked == 0
    (left,) = _query(db, "SELECT count(*) FROM ember.backlog")[0]
    assert left == 5, "every row waits for the next wake"


def test_the_round_limit_fails_the_run(db: str, steward_sim: SimServer) -> None:
    _backlog(db)
    _query(db, "UPDATE ember.settings SET value = '3' WHERE key = 'steward_max_rounds' RETURNING 1")
    steward_sim.reset(responder=Looping())
    done = asyncio.run(_wake(db, steward_sim.base_url))
    (status, rounds, error) = _query(db, "SELECT status, rounds, error FROM ember.steward_runs")[0]
    assert (status, rounds) == ("failed", 3)
    assert error.startswith("round limit")
    assert len(done["ctx"].calls) == 3
    (marked,) = _query(db, "SELECT count(*) FROM ember.messages WHERE episode_id IS NOT NULL")[0]
    assert marked == 0


def test_search_finds_a_fact_by_meaning_not_only_by_shared_words(
    db: str, steward_sim: SimServer
) -> None:
    _backlog(db)
    # Facts written with no embedding (straight through the step), then embedded by the worker.
    (plan,) = _query(db, "SELECT ember.claim_steward_run('test', '5 minutes')")[0]
    read = [int(x) for x in re.findall(r"m:(\d+) user\(human\)", " ".join(plan["pages"]))]
    tea, _, calls = read
    step = _query(
        db,
        "SELECT ember.steward_step('default', %s, %s, %s::jsonb)",
        plan["run_id"],
        plan["lease_token"],
        Jsonb(
            {
                "content": [
                    {
                        "type": "tool_use",
                        "id": new_tool_use_id(),
                        "name": "write_fact",
                        "input": {
                            "text": text,
                            "evidence_kind": "user-stated",
                            "evidence": [{"message_id": mid}],
                        },
                    }
                    for text, mid in (
                        ("The user prefers tea over coffee.", tea),
                        ("The user must not be phoned before nine in the morning.", calls),
                    )
                ]
            }
        ),
    )[0][0]
    assert not any(r["is_error"] for r in step["results"])
    (waiting,) = _query(db, "SELECT count(*) FROM ember.facts_to_embed()")[0]
    assert waiting == 2

    embedder = load_embedder()
    pipeline = StewardPipeline(embedder)
    ctx = InProcessContext(db, steward_sim.base_url)
    assert asyncio.run(pipeline.embed_pending(ctx)) == 2
    (waiting,) = _query(db, "SELECT count(*) FROM ember.facts_to_embed()")[0]
    assert waiting == 0

    # No word in common with either fact ("beverage", "favourite", "drink").
    query = "What is their favourite hot beverage to drink?"
    (vector,) = embedder.embed([query])
    found = _query(
        db,
        "SELECT text, vector_rank, text_rank"
        " FROM ember.search_memory('default', 'human', %s, %s::vector, 2)",
        query,
        vector_literal(vector),
    )
    assert found[0][0] == "The user prefers tea over coffee."
    assert found[0][1] == 1 and found[0][2] is None, "found by meaning alone"
    # The words alone find nothing.
    assert _query(db, "SELECT * FROM ember.search_memory('default', 'human', %s)", query) == []


def test_steward_and_shadow_share_one_worker_process_over_the_same_backlog(
    db: str, steward_sim: SimServer
) -> None:
    ids = _backlog(db, shadow=True)
    with host_on(db) as host:
        for thread in ("trip", "ops"):
            host.task_ended(thread)
    worker = WorkerProcess(
        db, steward_sim.base_url, "--pipelines", "shadow,steward", env={"EMBER_EMBEDDER": "minilm"}
    ).ready()
    try:
        worker.wait_for("run_finished", lambda e: e.get("pipeline") == "steward", timeout=60)
        worker.wait_for(
            "run_finished", lambda e: e.get("pipeline") == "shadow", count=2, timeout=60
        )
    finally:
        assert worker.stop() == 0
    (status,) = _query(db, "SELECT status FROM ember.steward_runs")[0]
    assert status == "completed"
    marked = {
        r[0] for r in _query(db, "SELECT id FROM ember.messages WHERE episode_id IS NOT NULL")
    }
    assert marked == set(ids.values())
    shadow = _query(db, "SELECT thread_id, status FROM ember.shadow_runs ORDER BY thread_id")
    assert shadow == [("ops", "completed"), ("trip", "completed")]
    (facts,) = _query(db, "SELECT count(*) FROM ember.facts")[0]
    (proposals,) = _query(db, "SELECT count(*) FROM ember.shadow_proposals")[0]
    assert facts > 0 and proposals > 0


def test_the_steward_prompt_names_the_evidence_kinds_and_tools_the_database_knows(db: str) -> None:
    text = (ROOT / "prompts" / "steward.md").read_text()
    named = set(re.findall(r"^- `([a-z-]+)`:", text, re.M))
    (definition,) = _query(
        db,
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE conname = 'facts_evidence_kind_check'",
    )[0]
    assert named == set(re.findall(r"'([a-z]+-[a-z]+)'", definition))
    assert set(re.findall(r"`([a-z_]+)`", text)) - {"m"} <= set(STEWARD_TOOLS) | {
        "user",
        "assistant",
    }
    for tool in STEWARD_TOOLS:
        assert f"`{tool}`" in text
    registered = _query(
        db, "SELECT name FROM ember.tools WHERE 'steward' = ANY(kinds) ORDER BY position"
    )
    assert [r[0] for r in registered] == list(STEWARD_TOOLS), "the tool registry lists them"

    assert not re.search(r"\byou are (a|an|the) ", text, re.I), "no persona"


class Silent:
    """A model that answers with no content at all."""

    name = "silent"

    async def respond(self, request: SimRequest) -> Reply:
        return Reply([], stop_reason="end_turn")


def test_an_empty_answer_fails_the_run_and_marks_nothing(db: str, steward_sim: SimServer) -> None:
    _backlog(db)
    steward_sim.reset(responder=Silent())
    done = asyncio.run(_wake(db, steward_sim.base_url))
    (status, error) = _query(db, "SELECT status, error FROM ember.steward_runs")[0]
    assert (status, error) == ("failed", "the model answered with no content")
    assert len(done["ctx"].calls) == 1
    (marked,) = _query(db, "SELECT count(*) FROM ember.messages WHERE episode_id IS NOT NULL")[0]
    assert marked == 0


def test_a_nul_in_the_answer_is_stored_as_data_not_a_database_error(
    db: str, steward_sim: SimServer
) -> None:
    ids = _backlog(db)
    fact = {
        "text": "The user prefers\x00 tea.",
        "evidence_kind": "user-stated",
        "evidence": [{"message_id": ids["tea"]}],
    }
    steward_sim.reset(
        responder=Scripted(
            [
                Reply.tool_use("write_fact", fact, text="Noted\x00."),
                Reply.tool_use("finish", {"through_message_id": ids["calls"]}),
            ]
        )
    )
    asyncio.run(_wake(db, steward_sim.base_url))
    assert _query(db, "SELECT status, error FROM ember.steward_runs") == [("completed", None)]
    assert _query(db, "SELECT text FROM ember.facts") == [("The user prefers\ufffd tea.",)]
