"""ember.host: the capture hook on async and streamed calls, and the symmetric tool policy."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime

import anthropic
import pytest

from ember.host import (
    PrefixCapture,
    shadow_tool,
    tool_call_refusal,
    turn_tools,
    unavailable_at_turn_start,
)
from ember.sim import Reply, Scripted, SimServer
from ember.tools import SHADOW_TOOL_NAME, ShadowMemoryPropose

BASH = {"name": "bash", "description": "run", "input_schema": {"type": "object"}}


@pytest.fixture(scope="module")
def host_sim() -> Iterator[SimServer]:
    with SimServer(responder=Scripted()) as server:
        yield server


def test_a_streamed_async_call_is_captured_as_bytes_and_assembled_answer(
    host_sim: SimServer,
) -> None:
    answer = Reply(
        [
            {"type": "thinking", "thinking": "Think first.", "signature": "sig-abc"},
            {"type": "text", "text": "Running it."},
            {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "ls -l"}},
        ],
        stop_reason="tool_use",
    )
    host_sim.reset(responder=Scripted([answer, answer]))
    capture = PrefixCapture()
    before = datetime.now(UTC)

    async def go() -> None:
        client = anthropic.AsyncAnthropic(
            base_url=host_sim.base_url,
            api_key="k",
            max_retries=0,
            http_client=capture.async_http_client(),
        )
        async with client.messages.stream(
            model="claude-sonnet-4-6",
            max_tokens=2048,
            thinking={"type": "enabled", "budget_tokens": 1024},
            tools=turn_tools([BASH]),  # type: ignore[arg-type]
            messages=[{"role": "user", "content": "list the files"}],
        ) as stream:
            final = await stream.get_final_message()
        assert final.content[2].type == "tool_use"
        await client.close()

    asyncio.run(go())
    captured = capture.take()
    entry = host_sim.requests[0]
    assert captured.request == entry.raw.decode()
    assert before <= captured.started_at <= datetime.now(UTC)
    response = json.loads(captured.response)
    assert response["content"] == entry.response["content"]  # type: ignore[index]
    assert response["stop_reason"] == "tool_use"
    assert response["usage"]["output_tokens"] == entry.usage["output_tokens"]  # type: ignore[index]
    with pytest.raises(LookupError):
        capture.take()


def test_a_failed_call_is_not_captured(host_sim: SimServer) -> None:
    host_sim.reset(responder="server-error")
    capture = PrefixCapture()
    client = anthropic.Anthropic(
        base_url=host_sim.base_url, api_key="k", max_retries=0, http_client=capture.http_client()
    )
    with pytest.raises(anthropic.InternalServerError):
        client.messages.create(
            model="claude-sonnet-4-6", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert capture.last is None


def test_the_shadow_tool_is_in_every_turn_and_kept_to_shadow_turns() -> None:
    tools = turn_tools([BASH, shadow_tool()])
    assert [t["name"] for t in tools] == ["bash", SHADOW_TOOL_NAME]
    assert tools[-1]["input_schema"] == ShadowMemoryPropose.model_json_schema()
    assert turn_tools([BASH]) == tools  # the same bytes every turn
    assert tool_call_refusal("bash", shadow_turn=False) is None
    assert tool_call_refusal(SHADOW_TOOL_NAME, shadow_turn=True) is None
    assert tool_call_refusal(SHADOW_TOOL_NAME, shadow_turn=False)
    assert tool_call_refusal("bash", shadow_turn=True)
    assert unavailable_at_turn_start(["bash", SHADOW_TOOL_NAME]) == ["bash"]
