"""Streaming: the SSE event sequence and where usage goes, through both SDK clients."""

from __future__ import annotations

import asyncio
from typing import Any

import anthropic

from ember.sim import SimServer
from simfixtures import (
    CC,
    STANDARD,
    conversation,
)

BODY: dict[str, Any] = {
    "model": STANDARD,
    "max_tokens": 200,
    "messages": conversation(1, tokens=60),
    "cache_control": CC,
}


def test_usage_is_in_message_start_and_cumulative_output_in_message_delta(
    sim_client: anthropic.Anthropic,
) -> None:
    plain = sim_client.messages.create(**BODY)  # writes the prefix
    events = list(sim_client.messages.create(**BODY, stream=True))
    kinds = [e.type for e in events]

    assert kinds[0] == "message_start"
    assert kinds[1] == "content_block_start"
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(kinds[2:-3]) == {"content_block_delta"}
    assert len(kinds[2:-3]) > 1  # the text arrives in pieces

    start = events[0].message
    assert start.content == [] and start.stop_reason is None
    assert start.usage.cache_read_input_tokens == 60
    assert start.usage.cache_creation_input_tokens == 0
    assert start.usage.input_tokens == 0
    assert start.usage.cache_creation is not None
    assert start.usage.cache_creation.ephemeral_5m_input_tokens == 0

    delta = events[-2]
    assert delta.delta.stop_reason == "end_turn"
    assert delta.usage.output_tokens == plain.usage.output_tokens > 1
    assert delta.usage.cache_read_input_tokens == 60
    assert "".join(e.delta.text for e in events[2:-3]) == plain.content[0].text


def test_the_stream_helper_accumulates_the_same_message(
    sim_client: anthropic.Anthropic, sim: SimServer
) -> None:
    sim.reset(responder="heuristic")
    body = {
        **BODY,
        "messages": [{"role": "user", "content": "m:7 user(human): I prefer short answers."}],
        "tools": [{"name": "shadow_memory_propose", "input_schema": {"type": "object"}}],
    }
    plain = sim_client.messages.create(**body)
    with sim_client.messages.stream(**body) as stream:
        streamed = stream.get_final_message()
    assert streamed.stop_reason == plain.stop_reason == "tool_use"
    assert [b.type for b in streamed.content] == ["tool_use"]
    assert streamed.content[0].input == plain.content[0].input  # rebuilt from input_json_delta
    assert streamed.usage.output_tokens == plain.usage.output_tokens
    assert sim.requests[-1].response is not None
    assert sim.requests[-1].usage == sim.requests[-2].usage


def test_the_async_client_streams_too(sim: SimServer) -> None:
    async def run() -> tuple[Any, Any]:
        async with anthropic.AsyncAnthropic(base_url=sim.base_url, api_key="test") as client:
            first = await client.messages.create(**BODY)
            stream = await client.messages.create(**BODY, stream=True)
            events = [event async for event in stream]
            return first, events

    first, events = asyncio.run(run())
    assert first.usage.cache_creation_input_tokens == 60
    assert events[0].type == "message_start"
    assert events[0].message.usage.cache_read_input_tokens == 60
    assert events[-2].type == "message_delta"
    assert events[-2].usage.output_tokens == first.usage.output_tokens


def test_streamed_thinking_keeps_its_signature(
    sim_client: anthropic.Anthropic, sim: SimServer
) -> None:
    from ember.sim import Reply, Scripted

    thinking = {"type": "thinking", "thinking": "step by step " * 10, "signature": "sig-42"}
    sim.reset(responder=Scripted([Reply([thinking, {"type": "text", "text": "done"}])]))
    with sim_client.messages.stream(**BODY) as stream:
        message = stream.get_final_message()
    assert message.content[0].type == "thinking"
    assert message.content[0].thinking == thinking["thinking"]
    assert message.content[0].signature == "sig-42"
