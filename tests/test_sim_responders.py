"""Responders: scripted answers, faults, hanging, latency and entry visibility."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import pydantic
import pytest

from ember.sim import Fault, Reply, Scripted, SimRequest, SimServer, Truncated
from ember.worker.calls import describe_error
from simfixtures import (
    CC,
    STANDARD,
    conversation,
)

BODY: dict[str, Any] = {"model": STANDARD, "max_tokens": 100, "messages": conversation(1)}
SHADOW_TOOL = {"name": "shadow_memory_propose", "input_schema": {"type": "object"}}


class Evidence(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    message_id: int


class Fact(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    text: str
    evidence_kind: str
    evidence: list[Evidence]


class Proposal(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    facts: list[Fact]


def test_scripted_answers_in_order_and_says_when_it_runs_out(
    sim_client: anthropic.Anthropic, sim: SimServer
) -> None:
    seen: list[SimRequest] = []

    def answer(request: SimRequest) -> Reply:
        seen.append(request)
        return Reply.tool_use("f", {"n": request.seq})

    raw = {"content": [{"type": "text", "text": "raw"}], "stop_reason": "stop_sequence"}
    sim.reset(responder=Scripted([Reply.text("one"), "two", answer, raw]))

    replies = [sim_client.messages.create(**BODY) for _ in range(4)]
    assert replies[0].content[0].text == "one"
    assert replies[1].content[0].text == "two"
    assert replies[2].content[0].input == {"n": sim.requests[2].seq}
    assert replies[2].stop_reason == "tool_use"
    assert replies[3].stop_reason == "stop_sequence"
    assert seen[0].model.name == STANDARD and seen[0].body["messages"] == BODY["messages"]

    with pytest.raises(anthropic.InternalServerError, match="no response left"):
        sim_client.messages.create(**BODY)


def test_a_rate_limit_carries_retry_after(sim_client: anthropic.Anthropic, sim: SimServer) -> None:
    sim.reset(responder=Scripted([Fault.rate_limited(retry_after=7)]))
    with pytest.raises(anthropic.RateLimitError) as caught:
        sim_client.messages.create(**BODY)
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": Fault.rate_limited().message},
    }


def test_the_sdk_retries_a_rate_limit_and_then_succeeds(sim: SimServer) -> None:
    sim.reset(responder=Scripted([Fault.rate_limited(retry_after=0.01), "after the wait"]))
    with anthropic.Anthropic(base_url=sim.base_url, api_key="test", max_retries=1) as client:
        reply = client.messages.create(**BODY)
    assert reply.content[0].text == "after the wait"
    assert [r.status for r in sim.requests] == [429, 200]


@pytest.mark.parametrize(
    ("name", "error", "status", "error_type"),
    [
        ("overloaded", anthropic.OverloadedError, 529, "overloaded_error"),
        ("server-error", anthropic.InternalServerError, 500, "api_error"),
        ("rate-limit:3", anthropic.RateLimitError, 429, "rate_limit_error"),
    ],
)
def test_named_faults(
    sim_client: anthropic.Anthropic,
    sim: SimServer,
    name: str,
    error: type[anthropic.APIStatusError],
    status: int,
    error_type: str,
) -> None:
    sim.reset(responder=name)
    with pytest.raises(error) as caught:
        sim_client.messages.create(**BODY, cache_control=CC)
    assert caught.value.status_code == status
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["error"]["type"] == error_type
    assert len(sim.cache) == 0  # a refused request writes nothing


def test_a_fault_can_be_chosen_per_request(sim_client: anthropic.Anthropic) -> None:
    headers = {"x-ember-sim-responder": "overloaded"}
    with pytest.raises(anthropic.OverloadedError):
        sim_client.messages.create(**BODY, extra_headers=headers)
    assert sim_client.messages.create(**BODY).content[0].type == "text"  # the default: echo

    with pytest.raises(anthropic.BadRequestError, match="unknown responder"):
        sim_client.messages.create(**BODY, extra_headers={"x-ember-sim-responder": "nope"})


def test_an_overload_in_the_middle_of_a_stream(
    sim_client: anthropic.Anthropic, sim: SimServer
) -> None:
    sim.reset(responder=Scripted([Fault.overloaded(mid_stream=True)]))
    stream = sim_client.messages.create(**BODY, stream=True)
    first = next(iter(stream))
    assert first.type == "message_start"
    with pytest.raises(anthropic.APIStatusError) as caught:
        list(stream)
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["error"]["type"] == "overloaded_error"


def _failure(call: Callable[[], object]) -> str:
    """What a failed run would record for this call: Ember's name for its failure."""
    with pytest.raises(Exception) as caught:  # which class is the SDK's choice
        call()
    return describe_error(caught.value)


def test_a_truncated_body_is_a_connection_error_however_the_sdk_spells_it(
    sim_client: anthropic.Anthropic, sim: SimServer
) -> None:
    """A body cut short is a dropped connection, whole or mid-stream: some SDK releases raise
    the HTTP library's RemoteProtocolError while streaming, others wrap it in
    APIConnectionError. Ember promises the same failure reason for both."""
    sim.reset(responder="truncated")
    assert _failure(lambda: sim_client.messages.create(**BODY)) == "connection error"
    streamed = _failure(lambda: list(sim_client.messages.create(**BODY, stream=True)))
    assert streamed == "connection error"
    sim.reset(responder=Scripted([Truncated(Reply.text("x" * 400), fraction=0.2)]))
    assert _failure(lambda: sim_client.messages.create(**BODY)) == "connection error"


@pytest.mark.parametrize(
    ("raised", "reason"),
    [
        (httpx2.RemoteProtocolError("peer closed connection without sending complete body"),
         "connection error"),
        (anthropic.APIConnectionError(request=httpx2.Request("POST", "http://sim/v1/messages")),
         "connection error"),
        (httpx2.ReadTimeout("timed out"), "timeout"),
        (anthropic.APITimeoutError(request=httpx2.Request("POST", "http://sim/v1/messages")),
         "timeout"),
    ],
)  # fmt: skip
def test_both_spellings_of_a_transport_failure_are_one_reason(
    raised: BaseException, reason: str
) -> None:
    assert describe_error(raised) == reason


def test_malformed_tool_input_fails_validation_where_the_heuristic_passes(
    sim_client: anthropic.Anthropic, sim: SimServer
) -> None:
    body = {
        **BODY,
        "tools": [SHADOW_TOOL],
        "messages": [{"role": "user", "content": "m:3 user(human): Always answer in French."}],
    }
    sim.reset(responder="malformed-tool-input")
    bad = sim_client.messages.create(**body).content[-1]
    assert bad.type == "tool_use" and bad.name == "shadow_memory_propose"
    with pytest.raises(pydantic.ValidationError):
        Proposal.model_validate(bad.input)

    sim.reset(responder="heuristic")
    good = sim_client.messages.create(**body).content[-1]
    assert good.type == "tool_use"
    assert Proposal.model_validate(good.input).facts[0].evidence == [Evidence(message_id=3)]


def test_latency_delays_the_answer(sim_client: anthropic.Anthropic, sim: SimServer) -> None:
    sim.reset(responder="latency:0.3:echo")
    started = time.monotonic()
    sim_client.messages.create(**BODY)
    assert time.monotonic() - started >= 0.3


def test_hang_waits_until_the_cancelled_client_goes_away(sim: SimServer) -> None:
    sim.reset(responder="hang")

    async def run() -> None:
        async with anthropic.AsyncAnthropic(
            base_url=sim.base_url, api_key="test", max_retries=0
        ) as client:
            task = asyncio.create_task(client.messages.create(**BODY, cache_control=CC))
            await asyncio.to_thread(sim.wait_for_requests, 1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(run())
    [entry] = sim.wait_for_requests(1, predicate=lambda e: e.finished)
    assert entry.disconnected
    assert entry.status is None
    assert len(sim.cache) == 0  # the response never started: nothing was written


def test_stopping_the_server_releases_a_hanging_request() -> None:
    outcome: list[BaseException] = []
    with SimServer(responder="hang") as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="test", max_retries=0)

        def call() -> None:
            try:
                client.messages.create(**{**BODY, "model": "claude-opus-4-8"})
            except BaseException as exc:
                outcome.append(exc)

        caller = threading.Thread(target=call)
        caller.start()
        server.wait_for_requests(1)
    caller.join(10)
    assert not caller.is_alive()
    assert isinstance(outcome[0], anthropic.APIStatusError | anthropic.APIConnectionError)


def test_a_new_entry_is_readable_only_once_its_writer_has_started_responding(
    sim_client: anthropic.Anthropic, sim: SimServer
) -> None:
    release = threading.Event()

    def held(_: SimRequest) -> str:
        release.wait(10)  # runs in a worker thread: the server keeps serving
        return "first"

    sim.reset(responder=Scripted([held, "second", "third"]))
    body = {**BODY, "cache_control": CC}
    first: list[Any] = []
    writer = threading.Thread(target=lambda: first.append(sim_client.messages.create(**body)))
    writer.start()
    sim.wait_for_requests(1)

    # The first request has not started its response: its entry is not readable yet.
    second = sim_client.messages.create(**body)
    assert second.usage.cache_read_input_tokens == 0
    assert second.usage.cache_creation_input_tokens == 40

    release.set()
    writer.join(10)
    assert first[0].usage.cache_creation_input_tokens == 40
    third = sim_client.messages.create(**body)
    assert third.usage.cache_read_input_tokens == 40
