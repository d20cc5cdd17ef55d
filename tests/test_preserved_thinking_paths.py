"""Preserved thinking on the hot path, over the wire: the real `anthropic` SDK against `ember sim`.

On every model of the registry with preserved thinking, a host turn with thinking is recorded
and the worker replays it hot: the thinking block goes back unchanged after an unchanged prefix,
so the simulator's prefix check passes and the prefix is read from the cache. One changed byte
before the block is refused with the documented 400 and the run fails with that reason. The
cold path, the steward and the semantic judge never send a thinking block at all.

The registry states no minimum cacheable length for these models, so they are never hot by
default; the tests record one as an operator would (`ember models load`), in the database and
the simulator alike.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal
from importlib import resources
from typing import Any

import anthropic
import psycopg
import pytest
from psycopg.types.json import Jsonb

import comparedata
from ember import queries
from ember.comparison.judge import run_semantic
from ember.host import PrefixCapture, turn_tools
from ember.registry import parse_registry
from ember.sim import Reply, Scripted, SimServer
from ember.sim.steward import StewardStandIn
from ember.tools import SEMANTIC_JUDGE_TOOL, SHADOW_TOOL_NAME
from ember.worker.shadow import ShadowPipeline
from ember.worker.steward import StewardPipeline
from simfixtures import words
from workerkit import API_KEY, InProcessContext, host_on, offer_cold, prepare, runs

CC = {"type": "ephemeral"}
SYSTEM = "You are a careful assistant for a small team. " + words("system", 1400)
THINKING_KINDS = ("thinking", "redacted_thinking")
OBSERVED_MIN = 1024


def _registry() -> dict[str, Any]:
    """The packaged registry, with an observed minimum recorded for the preserved models."""
    text = resources.files("ember.sim").joinpath("models.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    for entry in data["models"]:
        if entry.get("preserved_thinking"):
            entry["observed_min_cacheable_tokens"] = OBSERVED_MIN
    return data


PRESERVED = [e.name for e in parse_registry(_registry()).entries if e.preserved_thinking]


@pytest.fixture(scope="module")
def psim() -> Iterator[SimServer]:
    with SimServer(responder=Scripted(), models=_registry()) as server:
        yield server


@pytest.fixture
def hot_db(db: str, psim: SimServer) -> str:
    psim.reset(responder=Scripted(), models=_registry())
    prepare(db, ["t1"])
    entries = [e.sql_entry() for e in parse_registry(_registry()).entries if e.preserved_thinking]
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(queries.LOAD_MODELS, (Jsonb(entries),))
    return db


def _record_turn(
    url: str, sim: SimServer, model: str, system: str = SYSTEM, *, thinking: bool = True
) -> int:
    """One host turn on t1 with thinking on, recorded as the thread's prefix; the human row."""
    with host_on(url) as host:
        said = "From now on I prefer answers in metric units. " + words("ctx", 200)
        mid = host.append_message("t1", "user", said, author="human")
        capture = PrefixCapture()
        client = anthropic.Anthropic(
            base_url=sim.base_url, api_key=API_KEY, max_retries=0, http_client=capture.http_client()
        )
        sim.state.responder.push(Reply.text("Noted."))  # type: ignore[attr-defined]
        message = client.messages.create(
            model=model,
            max_tokens=4096,
            system=[{"type": "text", "text": system, "cache_control": CC}],
            tools=turn_tools([]),  # type: ignore[arg-type]
            thinking={"type": "adaptive"} if thinking else {"type": "disabled"},
            messages=[
                {"role": "user", "content": [{"type": "text", "text": said, "cache_control": CC}]}
            ],
            # The host opts into cache diagnostics, so the replay can be compared with it.
            extra_body={"diagnostics": {"previous_message_id": None}},
        )
        blocks = [b.model_dump(mode="json") for b in message.content]
        assert (blocks[0]["type"] == "thinking") is thinking, blocks
        host.append_message("t1", "assistant", "Noted.", blocks=blocks)
        assert host.note_prefix("t1", capture.take())
        host.waiting_for_user("t1")
    return mid


def _shadow(url: str, sim: SimServer, mid: int, path: str = "hot") -> None:
    sim.state.responder.push(  # type: ignore[attr-defined]
        Reply.tool_use(
            SHADOW_TOOL_NAME,
            {
                "facts": [
                    {
                        "text": "The user prefers metric units.",
                        "evidence_kind": "user-stated",
                        "evidence": [{"message_id": mid}],
                    }
                ]
            },
        )
    )

    async def go() -> None:
        pipeline = ShadowPipeline()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            job = await pipeline.claim(conn, "test", timedelta(minutes=5))
        assert job is not None and job.plan["path"] == path, job
        ctx = InProcessContext(url, sim.base_url)
        await pipeline.execute(job, ctx)
        await ctx.client.close()

    asyncio.run(go())


def _run_row(url: str, column: str) -> Any:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(f"SELECT {column} FROM ember.shadow_runs ORDER BY id DESC LIMIT 1")
        return row.fetchone()


@pytest.mark.parametrize("model", PRESERVED)
def test_the_hot_path_passes_the_prefix_check_on_every_preserved_thinking_model(
    hot_db: str, psim: SimServer, model: str
) -> None:
    mid = _record_turn(hot_db, psim, model)
    _shadow(hot_db, psim, mid)
    first, second = psim.requests[-2], psim.requests[-1]
    assert second.status == 200, second.error
    # The thinking block went back exactly as the API returned it, and nothing was dropped.
    replayed = second.body["messages"][len(first.body["messages"])]
    assert replayed == {"role": "assistant", "content": first.response["content"]}
    assert replayed["content"][0]["type"] == "thinking"
    assert "input_transformations" not in second.response
    (run,) = runs(hot_db)
    assert (run["status"], run["path"], run["model"]) == ("completed", "hot", model)
    assert run["cache_read_tokens"] >= OBSERVED_MIN
    # The worker asked for diagnostics against the host's request: no divergence to report.
    assert second.body["diagnostics"] == {"previous_message_id": first.response["id"]}
    assert _run_row(hot_db, "cache_diagnostics") == (None,)


def test_one_changed_byte_before_the_thinking_block_fails_the_run_with_the_reason(
    hot_db: str, psim: SimServer
) -> None:
    mid = _record_turn(hot_db, psim, "claude-opus-5-5")
    with psycopg.connect(hot_db, autocommit=True) as conn:
        conn.execute(
            "UPDATE ember.shadow_prefixes SET request = replace(request, 'careful assistant',"
            " 'careful  assistant') WHERE thread_id = 't1'"
        )
    _shadow(hot_db, psim, mid)
    assert psim.requests[-1].status == 400
    (run,) = runs(hot_db)
    assert run["status"] == "failed"
    assert run["error"] == (
        "http 400 invalid_request_error: messages.1.content.0: Invalid `signature` in `thinking` "
        "block. The block is bound to a different conversation. Remove the block, or set "
        '`thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
    )
    with psycopg.connect(hot_db, autocommit=True) as conn:
        stored = conn.execute("SELECT count(*) FROM ember.shadow_proposals").fetchone()
    assert stored == (0,)


def test_a_long_prompt_on_a_length_priced_model_is_paid_at_the_higher_rate(
    hot_db: str, psim: SimServer
) -> None:
    mid = _record_turn(hot_db, psim, "claude-haiku-5-5", system=SYSTEM + words("long", 101000))
    _shadow(hot_db, psim, mid)
    (run,) = runs(hot_db)
    assert run["status"] == "completed", run["error"]
    prompt = sum(run[k] for k in ("input_tokens", "cache_read_tokens", "cache_write_5m_tokens",
                                  "cache_write_1h_tokens"))  # fmt: skip
    assert prompt > 100000
    # Claude Haiku 5.5 over 100,000 prompt tokens: 0.50 / 2.50, writes 0.625 / 1.00, reads 0.05.
    tier = (
        run["input_tokens"] * Decimal("0.50")
        + run["output_tokens"] * Decimal("2.50")
        + run["cache_write_5m_tokens"] * Decimal("0.625")
        + run["cache_write_1h_tokens"] * Decimal("1.00")
        + run["cache_read_tokens"] * Decimal("0.05")
    ) / 1000000
    with psycopg.connect(hot_db, autocommit=True) as conn:
        (cost,) = conn.execute("SELECT cost_usd FROM ember.shadow_run_cost").fetchone() or (None,)
        (compared,) = conn.execute(
            "SELECT estimated_usd FROM ember.comparison_cost WHERE pipeline = 'shadow hot'"
        ).fetchone() or (None,)
    assert cost == tier and cost > 0
    assert compared == tier.quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP)


def _thinking_sent(sim: SimServer) -> list[str]:
    """Where any request the simulator saw carried a thinking block or turned thinking on."""
    found = []
    for entry in sim.requests:
        body = entry.body or {}
        thinking = body.get("thinking")
        if isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled"):
            found.append(f"request {entry.seq}: thinking {thinking}")
        for i, message in enumerate(body.get("messages") or []):
            content = message.get("content")
            for j, block in enumerate(content if isinstance(content, list) else []):
                if isinstance(block, dict) and block.get("type") in THINKING_KINDS:
                    found.append(f"request {entry.seq}: messages.{i}.content.{j}")
    return found


def test_the_cold_path_the_steward_and_the_judge_never_send_thinking_blocks(db: str) -> None:
    with host_on(db) as host:
        host.create_thread("main", "main")
        host.conn.execute("SELECT ember.shadow_activate()")
        host.conn.execute("SELECT ember.ensure_steward_thread('default')")
        host.conn.execute(
            "UPDATE ember.settings SET value = '\"0 seconds\"' WHERE key = 'idle_before_digest'"
        )
        host.create_thread("t1", "side")
        host.append_message(
            "t1",
            "assistant",
            "Usually around 22 degrees.",
            blocks=[
                {"type": "thinking", "thinking": "Rome in May.", "signature": "abc=="},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Usually around 22 degrees."},
            ],
        )
    mid = offer_cold(db, "t1", "I prefer tea over coffee.")
    with SimServer(responder=Scripted()) as sim:
        _shadow(db, sim, mid, path="cold")
        assert runs(db)[0]["status"] == "completed", runs(db)[0]["error"]
        assert sim.requests and _thinking_sent(sim) == []

    with SimServer(responder=StewardStandIn()) as sim:

        async def wake() -> None:
            pipeline = StewardPipeline()
            ctx = InProcessContext(db, sim.base_url)
            async with ctx.connection() as conn:
                job = await pipeline.claim(conn, "test", timedelta(minutes=5))
            assert job is not None
            await pipeline.execute(job, ctx)
            await ctx.client.close()

        asyncio.run(wake())
        assert len(sim.requests) >= 2  # rounds: every one re-sends the steward's history
        assert _thinking_sent(sim) == []

    with psycopg.connect(db, autocommit=True) as conn:
        comparedata.seed_case(conn)
        with SimServer(responder=Reply.tool_use(SEMANTIC_JUDGE_TOOL, {"pairs": []})) as sim:

            def client() -> anthropic.AsyncAnthropic:
                return anthropic.AsyncAnthropic(
                    base_url=sim.base_url, api_key="test", max_retries=0
                )

            run_semantic(conn, None, None, dry_run=False, client_factory=client)
            assert sim.requests and _thinking_sent(sim) == []


def test_the_report_shows_why_runs_missed_the_cache(
    hot_db: str,
    psim: SimServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ember.cli import main

    # A model without preserved thinking: a changed system prompt is only a cache miss, which
    # the diagnostics the worker asked for explain.
    mid = _record_turn(hot_db, psim, "claude-opus-4-8", thinking=False)
    with psycopg.connect(hot_db, autocommit=True) as conn:
        conn.execute(
            "UPDATE ember.shadow_prefixes SET request = replace(request, 'careful assistant',"
            " 'careful  assistant') WHERE thread_id = 't1'"
        )
    _shadow(hot_db, psim, mid)
    (run,) = runs(hot_db)
    assert (run["status"], run["cache_read_tokens"]) == ("completed", 0)
    (diagnostics,) = _run_row(hot_db, "cache_diagnostics")
    assert diagnostics["cache_miss_reason"]["type"] == "system_changed"
    # A cold run says why it was not hot.
    with host_on(hot_db) as host:
        host.create_thread("t2", "side")
    offer_cold(hot_db, "t2", "I prefer tea over coffee.")
    _shadow(hot_db, psim, mid, path="cold")

    monkeypatch.setenv("DATABASE_URL", hot_db)
    assert main(["compare", "--json"]) == 0
    misses = json.loads(capsys.readouterr().out)["cache_misses"]
    by_reason = {(m["path"], m["reason"]): m for m in misses}
    hot = by_reason[("hot", "system_changed")]
    assert (hot["model"], hot["source"], hot["runs"]) == ("claude-opus-4-8", "diagnostics", 1)
    assert hot["missed_tokens"] > 0
    assert by_reason[("cold", "no prefix is recorded for the thread")]["source"] == "hot_path_rule"
