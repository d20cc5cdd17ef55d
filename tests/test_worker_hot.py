"""The hot path over the wire (seed 000 section 2.1, the seed's prefix.wire.test.ts).

A host records a real turn through the real `anthropic` SDK against `ember sim`, with the
capture hook of `ember.host`; the worker's shadow pipeline then replays it. The shadow request
must carry the old request unchanged, then exactly the answer and the shadow question, and the
simulator must report the whole old prefix as a cache read.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from ember.sim import Reply, Scripted, SimServer
from ember.sim.responders import Heuristic
from ember.tools import SHADOW_TOOL_NAME
from ember.worker.jsonspan import scan
from ember.worker.shadow import PLACEHOLDER, ShadowPipeline
from workerkit import (
    InProcessContext,
    as_role,
    host_turn,
    prepare,
    proposals,
    runs,
)

CC = {"type": "ephemeral"}
BASH = {
    "name": "bash",
    "description": "run a shell command",
    "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}
SIGNATURE = "EqQBCkYIBxgCKkDsig" + "x" * 60


@pytest.fixture(scope="module")
def hot_sim() -> Iterator[SimServer]:
    with SimServer(responder=Scripted()) as server:
        yield server


def _record_turn(
    url: str,
    sim: SimServer,
    model: str,
    answer: Reply,
    *,
    thinking: bool = False,
) -> tuple[int, dict[str, Any]]:
    """One real host turn on thread t1: returns the human message id and the request sent."""
    sim.state.responder.push(answer)  # type: ignore[attr-defined]
    extra = {"thinking": {"type": "enabled", "budget_tokens": 1024}} if thinking else None
    mid = host_turn(url, sim.base_url, model=model, tools=[BASH], extra=extra)
    return mid, sim.requests[-1].body


def _shadow(url: str, sim: SimServer, mid: int, answer: Any = None) -> None:
    """Claim the thread's hot run and execute it in this process; the model answers `answer`,
    by default one valid and one invalid proposal."""
    sim.state.responder.push(  # type: ignore[attr-defined]
        answer
        or Reply.tool_use(
            SHADOW_TOOL_NAME,
            {
                "facts": [
                    {
                        "text": "The user prefers metric units.",
                        "evidence_kind": "user-stated",
                        "evidence": [{"message_id": mid}],
                    },
                    {"text": "A fact with no evidence", "evidence_kind": "user-stated"},
                ]
            },
        )
    )

    async def go() -> None:
        pipeline = ShadowPipeline()
        async with await psycopg.AsyncConnection.connect(as_role(url), autocommit=True) as conn:
            job = await pipeline.claim(conn, "test", timedelta(minutes=5))
        assert job is not None and job.plan["path"] == "hot", job
        ctx = InProcessContext(url, sim.base_url)
        await pipeline.execute(job, ctx)
        await ctx.client.close()

    asyncio.run(go())


def _check_wire(sim: SimServer, first: dict[str, Any]) -> dict[str, Any]:
    """The shape the seed's wire test asserts; returns the shadow request."""
    entries = sim.requests
    assert len(entries) == 2, [e.status for e in entries]
    assert all(e.status == 200 for e in entries), [e.error for e in entries]
    second = entries[1].body
    n = len(first["messages"])
    assert second["messages"][:n] == first["messages"]
    for key in ("system", "tools", "thinking", "tool_choice", "model", "max_tokens"):
        assert second.get(key) == first.get(key), key
    assert len(second["messages"]) == n + 2
    answer, question = second["messages"][n], second["messages"][n + 1]
    assert answer == {"role": "assistant", "content": entries[0].response["content"]}
    assert question["role"] == "user"
    assert "tool_choice" not in second
    # The whole old prefix (every position of the first request) is read from the cache.
    u0, u1 = entries[0].usage, entries[1].usage
    old_total = (
        u0["input_tokens"] + u0["cache_read_input_tokens"] + u0["cache_creation_input_tokens"]
    )
    assert u1["cache_read_input_tokens"] == old_total
    return second


def _check_stored(url: str, mid: int) -> None:
    (run,) = runs(url)
    assert run["status"] == "completed" and run["path"] == "hot"
    assert run["cache_read_tokens"] > 0
    stored = proposals(url)
    assert [p["validation_error"] is None for p in stored] == [True, False]
    assert stored[0]["evidence"] == [{"message_id": mid}]


@pytest.fixture
def wire_db(db: str, hot_sim: SimServer) -> str:
    hot_sim.reset(responder=Scripted())
    prepare(db, ["t1"])
    return db


def test_shadow_turn_replays_the_prefix_and_reads_it_from_cache(
    wire_db: str, hot_sim: SimServer
) -> None:
    mid, first = _record_turn(wire_db, hot_sim, "claude-sonnet-4-6", Reply.text("Noted."))
    _shadow(wire_db, hot_sim, mid)
    second = _check_wire(hot_sim, first)
    content = second["messages"][-1]["content"]
    assert [b["type"] for b in content] == ["text"]
    # The human row is in the replayed conversation: the question gives its key, not the row.
    said = first["messages"][0]["content"][0]["text"]
    assert f"m:{mid} = #1 user(human): {said[:48]}..." in content[0]["text"]
    assert said not in content[0]["text"]
    # The recorded answer is replayed too: the question gives its key.
    assert f"m:{mid + 1} = #2 assistant(agent): Noted." in content[0]["text"]
    # Exact bytes: the old body is the new one with the tail cut out at the messages' end.
    raw0, raw1 = hot_sim.requests[0].raw.decode(), hot_sim.requests[1].raw.decode()
    cut = scan(raw0).keys["messages"].end - 1
    # And the cache diagnostics that compare it with the request that wrote the prefix.
    answer_id = hot_sim.requests[0].response["id"]
    diag = f',"diagnostics":{{"previous_message_id":"{answer_id}"}}}}'
    assert raw1.startswith(raw0[:cut]) and raw1.endswith(raw0[cut:-1] + diag)
    _check_stored(wire_db, mid)


def test_a_dangling_tool_call_gets_a_placeholder_result_first(
    wire_db: str, hot_sim: SimServer
) -> None:
    answer = Reply.tool_use("bash", {"cmd": "ls"}, text="Let me look.")
    mid, first = _record_turn(wire_db, hot_sim, "claude-sonnet-4-6", answer)
    _shadow(wire_db, hot_sim, mid)
    second = _check_wire(hot_sim, first)
    tool_use = second["messages"][-2]["content"][-1]
    content = second["messages"][-1]["content"]
    assert [b["type"] for b in content] == ["tool_result", "text"]
    assert content[0]["tool_use_id"] == tool_use["id"]
    assert content[0]["content"] == PLACEHOLDER
    _check_stored(wire_db, mid)


def _thinking_answer(tool: bool) -> Reply:
    blocks: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": "The user wants metric units.", "signature": SIGNATURE},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy" + "r" * 40},
    ]
    if tool:
        blocks.append({"type": "tool_use", "id": "toolu_think01", "name": "bash", "input": {}})
        return Reply(blocks, stop_reason="tool_use")
    blocks.append({"type": "text", "text": "Noted: metric from now on."})
    return Reply(blocks)


def test_thinking_blocks_go_back_with_their_signatures(wire_db: str, hot_sim: SimServer) -> None:
    mid, first = _record_turn(
        wire_db, hot_sim, "claude-sonnet-4-6", _thinking_answer(False), thinking=True
    )
    _shadow(wire_db, hot_sim, mid)
    second = _check_wire(hot_sim, first)
    answer = second["messages"][-2]["content"]
    assert answer[0] == {
        "type": "thinking",
        "thinking": "The user wants metric units.",
        "signature": SIGNATURE,
    }
    assert answer[1]["type"] == "redacted_thinking"
    _check_stored(wire_db, mid)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_last_turn_thinking_model_gets_the_question_inside_the_placeholder(
    wire_db: str, hot_sim: SimServer
) -> None:
    mid, first = _record_turn(
        wire_db, hot_sim, "claude-sonnet-4-5", _thinking_answer(True), thinking=True
    )
    _shadow(wire_db, hot_sim, mid)
    second = _check_wire(hot_sim, first)
    content = second["messages"][-1]["content"]
    # Only tool results: a text block here would strip the answer's thinking on this model.
    assert [b["type"] for b in content] == ["tool_result"]
    assert content[0]["content"].startswith(PLACEHOLDER)
    assert f"m:{mid} = #1 user(human):" in content[0]["content"]
    assert hot_sim.requests[1].cache["stripped_thinking"] == []
    _check_stored(wire_db, mid)


def test_a_request_without_a_final_marker_gets_one_within_the_limit(
    wire_db: str, hot_sim: SimServer
) -> None:
    """Markers are not hashed: adding one on the old last block changes no cached prefix."""
    from ember.worker.shadow import build_hot_request

    request = {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    import json

    built = build_hot_request(
        json.dumps(request),
        json.dumps({"content": []}),
        ["m:1 user(human): hi"],
        last_turn_thinking=False,
    )
    body = json.loads(built.body)
    assert built.marker_added
    expected = copy.deepcopy(request["messages"][0])
    expected["content"][0]["cache_control"] = CC
    assert body["messages"][0] == expected
    four = dict(request, system=[{"type": "text", "text": "s", "cache_control": CC}] * 4)
    built = build_hot_request(
        json.dumps(four), json.dumps({"content": []}), [], last_turn_thinking=False
    )
    assert not built.marker_added


def test_a_hot_run_cites_the_rows_of_its_prefix_through_the_key(
    wire_db: str, hot_sim: SimServer
) -> None:
    """The heuristic model reads the key, finds each row in the conversation it replays, and
    cites it by id: every proposal valid, and no row of the prefix repeated in the tail."""
    mid, first = _record_turn(wire_db, hot_sim, "claude-sonnet-4-6", Reply.text("Noted."))
    _shadow(wire_db, hot_sim, mid, Heuristic().respond)
    question = hot_sim.requests[1].body["messages"][-1]["content"][0]["text"]
    said = first["messages"][0]["content"][0]["text"]
    assert said not in question, "a row of the prefix was repeated in the tail"
    stored = proposals(wire_db)
    assert stored, "nothing was proposed"
    assert [p["validation_error"] for p in stored] == [None] * len(stored)
    cited = [e for p in stored for e in p["evidence"]]
    assert {"message_id": mid} in cited, cited


def test_a_hot_claim_predicts_the_input_cost_it_then_pays(wire_db: str, hot_sim: SimServer) -> None:
    """The claim's prediction of the hot run's input (the prefix at the cache-read price, the
    tail at the input price) against what the run cost at the simulator's counts; and the cold
    alternative it recorded beside it, in comparison_cost."""
    mid, _ = _record_turn(wire_db, hot_sim, "claude-sonnet-4-6", Reply.text("Noted."))
    _shadow(wire_db, hot_sim, mid)
    with psycopg.connect(wire_db, autocommit=True) as conn:
        predicted, prediction, read, uncached = conn.execute(
            "SELECT predicted_hot_usd, cost_prediction, cache_read_tokens, input_tokens"
            " FROM ember.shadow_runs"
        ).fetchone()
        ((input_usd, predicted_sum, other_sum),) = conn.execute(
            "SELECT input_usd, predicted_input_usd, predicted_other_path_usd"
            " FROM ember.comparison_cost() WHERE pipeline = 'shadow hot'"
        ).fetchall()
    assert prediction["prefix_tokens"] == read, "the prefix is what the replay read from the cache"
    # The tail is estimated from what SQL renders and the question's setting: within a third.
    assert abs(prediction["hot_tail_tokens"] - uncached) <= uncached / 3, (prediction, uncached)
    assert abs(predicted - input_usd) <= input_usd / 5, (predicted, input_usd)
    assert predicted_sum == round(predicted, 6)
    assert other_sum == round(Decimal(str(prediction["cold_usd"])), 6) > 0
