"""`ember sim` enforces preserved thinking and reports cache diagnostics as Anthropic documents
them, seen through the real SDK over HTTP."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from ember.sim import SimServer
from ember.sim.binding import BINDING_BETA
from ember.sim.models import load_models

PRESERVED = sorted(n for n, m in load_models().models.items() if m.preserved_thinking)
SYSTEM = "You keep notes for the user."
DROP = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}


@pytest.fixture(name="client", scope="module")
def _client() -> Iterator[anthropic.Anthropic]:
    with (
        SimServer(responder="echo") as server,
        anthropic.Anthropic(base_url=server.base_url, api_key="test", max_retries=0) as client,
    ):
        yield client


def _post(
    client: anthropic.Anthropic, body: dict[str, Any], betas: str | None = None
) -> dict[str, Any]:
    headers = {"anthropic-beta": betas} if betas else {}
    answer: dict[str, Any] = client.post(
        "/v1/messages", body=body, cast_to=object, options={"headers": headers}
    )
    return answer


def _first(client: anthropic.Anthropic, model: str) -> tuple[dict[str, Any], dict[str, Any]]:
    body = {
        "model": model,
        "max_tokens": 64,
        "system": SYSTEM,
        "thinking": {"type": "adaptive"},
        "messages": [{"role": "user", "content": "Remember that I take the 7:40 train."}],
    }
    return body, _post(client, body)


def _replay(body: dict[str, Any], answer: dict[str, Any], **changes: Any) -> dict[str, Any]:
    again = copy.deepcopy(body)
    again["messages"] += [
        {"role": "assistant", "content": answer["content"]},
        {"role": "user", "content": "Which train?"},
    ]
    again.update(changes)
    return again


@pytest.mark.parametrize("model", PRESERVED)
def test_a_thinking_block_replayed_after_an_unchanged_prefix_is_accepted(
    client: anthropic.Anthropic, model: str
) -> None:
    body, answer = _first(client, model)
    assert answer["content"][0]["type"] == "thinking"
    again = _post(client, _replay(body, answer))
    assert "input_transformations" not in again


@pytest.mark.parametrize("model", PRESERVED)
def test_one_changed_byte_before_a_thinking_block_is_the_documented_400(
    client: anthropic.Anthropic, model: str
) -> None:
    body, answer = _first(client, model)
    with pytest.raises(anthropic.BadRequestError) as err:
        _post(client, _replay(body, answer, system=SYSTEM + " "))
    message = err.value.body["error"]["message"]  # type: ignore[index]
    assert message == (
        "messages.1.content.0: Invalid `signature` in `thinking` block. The block is bound to a "
        "different conversation. Remove the block, or set "
        '`thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
    )


def test_a_request_that_opts_into_dropping_gets_the_block_dropped_and_listed(
    client: anthropic.Anthropic,
) -> None:
    body, answer = _first(client, "claude-opus-5-5")
    edited = _replay(body, answer, thinking=DROP)
    edited["messages"][0]["content"] = "Remember that I take the 7:45 train."
    again = _post(client, edited, betas=BINDING_BETA)
    assert again["input_transformations"] == [
        {"type": "thinking_dropped", "path": "messages.1.content.0",
         "reason": "prefix_binding_mismatch"}
    ]  # fmt: skip
    with pytest.raises(anthropic.BadRequestError, match=BINDING_BETA):
        _post(client, edited)  # the setting without its beta header is refused


def test_another_models_blocks_are_dropped_unless_the_model_reads_them(
    client: anthropic.Anthropic,
) -> None:
    body, answer = _first(client, "claude-opus-5-5")
    # Claude Sonnet 5.5 does not read Claude Opus 5.5's blocks: dropped, no error.
    other = _post(client, _replay(body, answer, model="claude-sonnet-5-5"))
    assert other["input_transformations"] == [
        {"type": "thinking_dropped", "path": "messages.1.content.0",
         "reason": "model_binding_mismatch"}
    ]  # fmt: skip
    # Claude Fable 5.1 reads them (the preserved-thinking page).
    fable = _post(client, _replay(body, answer, model="claude-fable-5-1"))
    assert "input_transformations" not in fable


def test_a_block_that_carries_no_binding_fails_the_prefix_check(
    client: anthropic.Anthropic,
) -> None:
    body, answer = _first(client, "claude-haiku-5-5")
    forged = copy.deepcopy(answer)
    forged["content"][0]["signature"] = "abc=="
    with pytest.raises(anthropic.BadRequestError, match="bound to a different conversation"):
        _post(client, _replay(body, forged))


def test_cache_diagnostics_name_the_first_divergence(client: anthropic.Anthropic) -> None:
    body = {
        "model": "claude-opus-4-8",
        "max_tokens": 16,
        "system": SYSTEM,
        "tools": [{"name": "note", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "hello"}],
        "diagnostics": {"previous_message_id": None},
    }
    first = _post(client, body)
    assert first["diagnostics"] is None

    def after(**changes: Any) -> Any:
        nxt = {**copy.deepcopy(body), "diagnostics": {"previous_message_id": first["id"]}}
        nxt["messages"] += [
            {"role": "assistant", "content": first["content"]},
            {"role": "user", "content": "more"},
        ]
        nxt.update(changes)
        return _post(client, nxt)["diagnostics"]

    assert after() is None  # only appended: nothing to explain
    assert after(system=SYSTEM + "!")["cache_miss_reason"]["type"] == "system_changed"
    tools = after(tools=[{"name": "note2", "input_schema": {"type": "object"}}])
    assert tools["cache_miss_reason"]["type"] == "tools_changed"
    assert tools["cache_miss_reason"]["cache_missed_input_tokens"] > 0
    assert after(model="claude-opus-4-7")["cache_miss_reason"]["type"] == "model_changed"
    changed = after(messages=[{"role": "user", "content": "bye"}])
    assert changed["cache_miss_reason"]["type"] == "messages_changed"
    assert after(tool_choice={"type": "any"})["cache_miss_reason"]["type"] == "unavailable"
    lost = {**body, "diagnostics": {"previous_message_id": "msg_unknown"}}
    assert _post(client, lost)["diagnostics"] == {
        "cache_miss_reason": {"type": "previous_message_not_found"}
    }
