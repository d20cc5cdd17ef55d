"""ember.host puts the history cache breakpoint on the last message of each request it sends:
only the marker is added, the recorded bytes are the bytes sent, and the host's next turn (and
so the hot replay) reads the whole earlier request from the cache."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from ember.cachemark import mark_history
from ember.host import PrefixCapture, turn_tools
from ember.sim import SimServer

MODEL = "claude-sonnet-4-6"
SYSTEM = "You plan trips for a small team. Keep answers short and ask before booking. " * 80
MARK = ',"cache_control":{"type":"ephemeral"}'
MARKED = {"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}


@pytest.fixture(scope="module")
def host_sim() -> Iterator[SimServer]:
    with SimServer(responder="host") as server:
        yield server


def _client(sim: SimServer, capture: PrefixCapture) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=sim.base_url, api_key="k", max_retries=0, http_client=capture.http_client()
    )


def _call(client: anthropic.Anthropic, messages: list[dict[str, Any]]) -> Any:
    return client.messages.create(
        model=MODEL,
        max_tokens=256,
        system=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        tools=turn_tools([]),  # type: ignore[arg-type]
        messages=messages,  # type: ignore[arg-type]
    )


def test_only_the_marker_is_added_and_what_was_sent_is_recorded(host_sim: SimServer) -> None:
    host_sim.reset(responder="host")
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Find me a train to Porto."}]}
    ]
    plain, marked = PrefixCapture(mark_history=False), PrefixCapture()
    _call(_client(host_sim, plain), messages)
    _call(_client(host_sim, marked), messages)
    before, after = plain.take().request, marked.take().request
    sent = [entry.raw.decode() for entry in host_sim.requests]
    assert sent == [before, after], "the capture records exactly the bytes that went out"
    assert after.count(MARK) == before.count(MARK) + 1
    position = next(i for i, (a, b) in enumerate(zip(after, before, strict=False)) if a != b)
    assert after[position : position + len(MARK)] == MARK
    assert after[:position] + after[position + len(MARK) :] == before, "no other byte changes"
    last_block = json.loads(after)["messages"][-1]["content"][-1]
    assert last_block["cache_control"] == {"type": "ephemeral"}


def test_a_string_content_becomes_one_marked_text_block_with_the_same_text() -> None:
    body = b'{"model":"m","messages":[{"role":"user","content":"caf\\u00e9 \\"ol\xc3\xa9\\""}]}'
    marked = mark_history(body)
    assert marked is not None
    assert json.loads(marked)["messages"][0]["content"] == [
        {"type": "text", "text": 'café "olé"', "cache_control": {"type": "ephemeral"}}
    ]
    assert b'"text":"caf\\u00e9 \\"ol\xc3\xa9\\""' in marked, "the string is copied as written"


@pytest.mark.parametrize(
    "body",
    [
        # already marked on its last message
        {"messages": [{"role": "user", "content": [MARKED]}]},
        # the automatic breakpoint (top-level cache_control) already sits on the last block
        {"cache_control": {"type": "ephemeral"}, "messages": [{"role": "user", "content": "a"}]},
        # four breakpoints already
        {
            "system": [{**MARKED, "text": f"s{i}"} for i in range(4)],
            "messages": [{"role": "user", "content": "a"}],
        },
        # nothing markable at the end
        {"messages": [{"role": "user", "content": ""}]},
    ],
)  # fmt: skip
def test_a_request_that_needs_no_marker_is_sent_as_is(body: dict[str, Any]) -> None:
    assert mark_history(json.dumps({"model": "m", **body}).encode()) is None


def test_the_next_turn_reads_the_whole_earlier_request_from_the_cache(host_sim: SimServer) -> None:
    for mark in (True, False):
        host_sim.reset(responder="host")
        capture = PrefixCapture(mark_history=mark)
        client = _client(host_sim, capture)
        history: list[dict[str, Any]] = []
        for said in ("I always prefer window seats. " * 150, "Find me a train on Friday. " * 30):
            history.append({"role": "user", "content": said})
            reply = _call(client, history)
            blocks = [b.model_dump(mode="json", exclude_none=True) for b in reply.content]
            history.append({"role": "assistant", "content": blocks})
        first, second = host_sim.requests[0], host_sim.requests[1]
        assert first.usage is not None and second.usage is not None
        first_total = sum(
            first.usage[k]
            for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        )
        if mark:
            assert second.usage["cache_read_input_tokens"] == first_total
        else:
            # Without the breakpoint only the system prompt and tools were cached.
            assert second.usage["cache_read_input_tokens"] < 0.8 * first_total
