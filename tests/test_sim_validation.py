"""Refusals: Anthropic-shaped errors with the right status, never a traceback."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

from ember.sim import SimServer
from simfixtures import (
    CC,
    CC_1H,
    STANDARD,
    raw_post,
    text,
    words,
)

THINK = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
TOOL = {"name": "f", "input_schema": {"type": "object"}}


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def tool_use(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "f", "input": {}}


def tool_result(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}


HELLO = text("hello")
CASES: dict[str, tuple[dict[str, Any], str]] = {
    "five breakpoints": (
        {"messages": [user(*(text(f"b{i}", CC) for i in range(5)))]},
        "A maximum of 4 blocks with cache_control",
    ),
    "four breakpoints and the automatic one": (
        {"messages": [user(*(text(f"b{i}", CC) for i in range(4)))], "cache_control": CC},
        "Found 5",
    ),
    "marker on thinking": (
        {
            "messages": [user(HELLO), assistant({**THINK, "cache_control": CC}), user(HELLO)],
            "thinking": {"type": "enabled", "budget_tokens": 1024},
        },
        "cannot be set on thinking",
    ),
    "marker on redacted thinking": (
        {
            "messages": [
                user(HELLO),
                assistant({"type": "redacted_thinking", "data": "xyz", "cache_control": CC}),
                user(HELLO),
            ]
        },
        "cannot be set on redacted_thinking",
    ),
    "marker on empty text": (
        {"messages": [user(HELLO, text("", CC))]},
        "text content blocks must be non-empty",
    ),
    "1h after 5m": (
        {"system": [text("s", CC)], "messages": [user(text("u", CC_1H))]},
        "ttl='1h' cache_control block must not come after a ttl='5m'",
    ),
    "automatic 1h after explicit 5m": (
        {"messages": [user(text("u", CC))], "cache_control": CC_1H},
        "must not come after",
    ),
    "unanswered tool_use": (
        {"messages": [user(HELLO), assistant(tool_use("t1")), user(HELLO)]},
        "`tool_use` ids were found without `tool_result` blocks immediately after: t1",
    ),
    "tool_use answered only partly": (
        {
            "messages": [
                user(HELLO),
                assistant(tool_use("t1"), tool_use("t2")),
                user(tool_result("t1")),
            ]
        },
        "immediately after: t2",
    ),
    "tool_use answered a message late": (
        {
            "messages": [
                user(HELLO),
                assistant(tool_use("t1")),
                user(HELLO),
                assistant(text("ok")),
                user(tool_result("t1")),
            ]
        },
        "immediately after: t1",
    ),
    "text before the tool results": (
        {"messages": [user(HELLO), assistant(tool_use("t1")), user(HELLO, tool_result("t1"))]},
        "must come first",
    ),
    "tool_result without its tool_use": (
        {"messages": [user(tool_result("nope"))]},
        "unexpected `tool_use_id`",
    ),
    "forced tool with thinking": (
        {
            "messages": [user(HELLO)],
            "tools": [TOOL],
            "tool_choice": {"type": "tool", "name": "f"},
            "thinking": {"type": "enabled", "budget_tokens": 1024},
        },
        "Thinking may not be enabled when tool_choice forces tool use",
    ),
    "any tool with thinking": (
        {
            "messages": [user(HELLO)],
            "tools": [TOOL],
            "tool_choice": {"type": "any"},
            "thinking": {"type": "adaptive"},
        },
        "forces tool use",
    ),
    "empty messages": ({"messages": []}, "messages"),
    "bad ttl": ({"messages": [user(text("u", {"type": "ephemeral", "ttl": "2h"}))]}, "ttl"),
}


@pytest.mark.parametrize("case", CASES)
def test_each_rule_is_an_invalid_request_error(
    sim_client: anthropic.Anthropic, sim: SimServer, case: str
) -> None:
    body, message = CASES[case]
    with pytest.raises(anthropic.BadRequestError) as caught:
        sim_client.messages.create(model=STANDARD, max_tokens=2000, **body)
    assert caught.value.status_code == 400
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["type"] == "error"
    assert error["error"]["type"] == "invalid_request_error"
    assert message in error["error"]["message"]
    # A refused request is logged with its error and touches no cache entry.
    assert sim.requests[-1].error == error
    assert len(sim.cache) == 0


def test_a_valid_tool_loop_passes(sim_client: anthropic.Anthropic) -> None:
    messages = [
        user(HELLO),
        assistant(text("let me look"), tool_use("t1"), tool_use("t2")),
        user(tool_result("t2"), tool_result("t1"), text("and also")),
    ]
    sim_client.messages.create(model=STANDARD, max_tokens=10, messages=messages)


def test_an_unknown_model_is_not_found_as_anthropic_reports_it(
    sim_client: anthropic.Anthropic,
) -> None:
    with pytest.raises(anthropic.NotFoundError) as caught:
        sim_client.messages.create(model="claude-nope", max_tokens=10, messages=[user(HELLO)])
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "model: claude-nope"},
    }


def test_count_tokens_validates_the_same_rules(sim_client: anthropic.Anthropic) -> None:
    body, _ = CASES["unanswered tool_use"]
    with pytest.raises(anthropic.BadRequestError):
        sim_client.messages.count_tokens(model=STANDARD, **body)


GOOD = {"model": STANDARD, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("path", "data", "headers", "status", "error_type"),
    [
        ("/v1/messages", b"{not json", None, 400, "invalid_request_error"),
        ("/v1/messages", b"\xff\xfe", None, 400, "invalid_request_error"),
        ("/v1/messages", b'{"model": NaN}', None, 400, "invalid_request_error"),
        ("/v1/messages", b"[1, 2]", None, 400, "invalid_request_error"),
        ("/v1/messages", b"", None, 400, "invalid_request_error"),
        (
            "/v1/messages",
            json.dumps(GOOD).encode(),
            {"content-type": "text/plain"},
            400,
            "invalid_request_error",
        ),
        ("/v1/messages", json.dumps(GOOD).encode(), {"x-api-key": ""}, 401, "authentication_error"),
        (
            "/v1/messages",
            json.dumps(GOOD).encode(),
            {"anthropic-version": ""},
            400,
            "invalid_request_error",
        ),
        (
            "/v1/messages",
            json.dumps({**GOOD, "model": None}).encode(),
            None,
            400,
            "invalid_request_error",
        ),
        (
            "/v1/messages",
            json.dumps({k: v for k, v in GOOD.items() if k != "max_tokens"}).encode(),
            None,
            400,
            "invalid_request_error",
        ),
        (
            "/v1/messages",
            json.dumps({**GOOD, "messages": "hi"}).encode(),
            None,
            400,
            "invalid_request_error",
        ),
        (
            "/v1/messages",
            json.dumps({**GOOD, "messages": [{"role": "robot", "content": "x"}]}).encode(),
            None,
            400,
            "invalid_request_error",
        ),
        (
            "/v1/messages",
            json.dumps({**GOOD, "messages": [{"role": "user", "content": [{}]}]}).encode(),
            None,
            400,
            "invalid_request_error",
        ),
        (
            "/v1/messages",
            json.dumps({**GOOD, "stream": "yes"}).encode(),
            None,
            400,
            "invalid_request_error",
        ),
        (
            "/v1/messages",
            json.dumps({**GOOD, "tools": [{"name": "x"}]}).encode(),
            None,
            400,
            "invalid_request_error",
        ),
        ("/v1/messages/count_tokens", b"{}", None, 400, "invalid_request_error"),
        ("/v1/complete", json.dumps(GOOD).encode(), None, 404, "not_found_error"),
        ("/", None, None, 404, "not_found_error"),
    ],
)
def test_bad_input_gets_anthropic_shaped_json(
    sim: SimServer,
    path: str,
    data: bytes | None,
    headers: dict[str, str] | None,
    status: int,
    error_type: str,
) -> None:
    got_status, body = raw_post(
        sim.base_url, path, data, headers, "GET" if data is None else "POST"
    )
    assert got_status == status
    assert body["type"] == "error"
    assert body["error"]["type"] == error_type
    assert "Traceback" not in body["error"]["message"]


def test_a_wrong_method_is_refused_as_json(sim: SimServer) -> None:
    status, body = raw_post(sim.base_url, "/v1/messages", None, method="GET")
    assert status == 405
    assert body["type"] == "error"


def test_a_thinking_budget_must_fit_under_max_tokens(sim_client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError, match="budget_tokens"):
        sim_client.messages.create(
            model=STANDARD,
            max_tokens=1000,
            messages=[user(text(words("x", 10)))],
            thinking={"type": "enabled", "budget_tokens": 1024},
        )


def test_a_null_cache_control_is_no_marker(sim_client: anthropic.Anthropic, sim: SimServer) -> None:
    # The API types every cache_control as optional: null is accepted and marks nothing.
    tool = {**TOOL, "cache_control": None}
    messages = [user(text(words("x", 40)) | {"cache_control": None}, text(words("y", 40), CC))]
    sim_client.messages.create(model=STANDARD, max_tokens=10, tools=[tool], messages=messages)
    assert sim.requests[-1].body["messages"][0]["content"][0]["cache_control"] is None
    [marked] = sim.requests[-1].cache["breakpoints"]
    assert marked["where"] == "messages.0.content.1"
