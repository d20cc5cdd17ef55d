"""Prompt-cache accounting through the real SDK, rule by rule (anthropic-cache-rules.md)."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import anthropic
import pytest

from ember.sim import ManualClock, SimServer
from ember.tokens import canonical_json, estimate_tokens
from simfixtures import (
    CC,
    CC_1H,
    LAST_TURN,
    MIN,
    OTHER,
    STANDARD,
    conversation,
    text,
    tokens_of,
    usage_of,
    words,
)
from simmedia import image_block, png


def create(client: anthropic.Anthropic, **body: Any) -> Any:
    body.setdefault("model", STANDARD)
    body.setdefault("max_tokens", 20)
    return client.messages.create(**body)


def test_first_request_writes_and_an_identical_second_reads_the_whole_prefix(
    sim_client: anthropic.Anthropic,
) -> None:
    system = words("system", 100)
    messages = conversation(3)
    body = {"system": [text(system, CC)], "messages": messages, "cache_control": CC}
    total = tokens_of(system, *(m["content"][0]["text"] for m in messages))

    assert usage_of(create(sim_client, **body)) == (0, total, 0, 0, total)
    assert usage_of(create(sim_client, **body)) == (total, 0, 0, 0, total)


def test_the_async_client_sees_the_same_accounting(sim: SimServer) -> None:
    body = {"model": STANDARD, "max_tokens": 20, "messages": conversation(1), "cache_control": CC}

    async def run() -> list[Any]:
        async with anthropic.AsyncAnthropic(base_url=sim.base_url, api_key="test") as client:
            return [await client.messages.create(**body) for _ in range(2)]

    first, second = asyncio.run(run())
    assert usage_of(first) == (0, 40, 0, 0, 40)
    assert usage_of(second) == (40, 0, 0, 0, 40)


N = 6


@pytest.mark.parametrize("k", range(N))
def test_a_changed_character_in_message_k_misses_from_k_on_and_hits_before_it(
    sim_client: anthropic.Anthropic, k: int
) -> None:
    messages = conversation(N)  # 40 tokens each
    for j in range(N):  # one request ending at every message leaves an entry there
        create(sim_client, messages=messages[: j + 1], cache_control=CC)

    edited = copy.deepcopy(messages)
    block = edited[k]["content"][0]
    block["text"] = block["text"][:10] + "#" + block["text"][11:]
    read, w5, w1, uncached, total = usage_of(create(sim_client, messages=edited, cache_control=CC))

    assert total == 40 * N
    assert read == 40 * k
    assert (w5, w1, uncached) == (total - read, 0, 0)


def test_moving_or_adding_a_marker_on_an_existing_block_changes_nothing(
    sim_client: anthropic.Anthropic,
) -> None:
    messages = conversation(4)
    marked_last = copy.deepcopy(messages)
    marked_last[-1]["content"][0]["cache_control"] = CC
    assert usage_of(create(sim_client, messages=marked_last)) == (0, 160, 0, 0, 160)

    added = copy.deepcopy(marked_last)
    added[1]["content"][0]["cache_control"] = CC
    assert usage_of(create(sim_client, messages=added)) == (160, 0, 0, 0, 160)

    # The same block marked through the automatic top-level marker instead.
    assert usage_of(create(sim_client, messages=messages, cache_control=CC)) == (160, 0, 0, 0, 160)

    # The hot path's pattern: append a tail and move the marker to the new last block.
    longer = copy.deepcopy(messages) + conversation(6)[4:]
    longer[-1]["content"][0]["cache_control"] = CC
    assert usage_of(create(sim_client, messages=longer)) == (160, 80, 0, 0, 240)


LOOKUP_TOOL: dict[str, Any] = {
    "name": "lookup",
    "description": words("tool", 40),
    "input_schema": {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
    },
}


def post_raw(client: anthropic.Anthropic, raw: bytes) -> Any:
    return client.post("/v1/messages", content=raw, cast_to=anthropic.types.Message)


def test_whitespace_and_top_level_key_order_do_not_matter_but_nested_key_order_does(
    sim_client: anthropic.Anthropic, sim: SimServer
) -> None:
    body = {
        "model": STANDARD,
        "max_tokens": 20,
        "tools": [{**LOOKUP_TOOL, "cache_control": CC}],
        "messages": [{"role": "user", "content": [text(words("q", 40), CC)]}],
    }
    total = usage_of(post_raw(sim_client, json.dumps(body, separators=(",", ":")).encode()))[1]

    spaced = json.dumps(dict(reversed(list(body.items()))), indent=3).encode()
    assert usage_of(post_raw(sim_client, spaced))[:2] == (total, 0)
    assert sim.requests[-1].raw == spaced  # the log keeps the bytes as received

    schema = LOOKUP_TOOL["input_schema"]
    swapped = {"properties": schema["properties"], "type": "object"}
    reordered = {**body, "tools": [{**LOOKUP_TOOL, "input_schema": swapped, "cache_control": CC}]}
    assert usage_of(post_raw(sim_client, json.dumps(reordered).encode()))[0] == 0


def test_tool_use_input_key_order_is_part_of_the_prefix(sim_client: anthropic.Anthropic) -> None:
    def messages(tool_input: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {"role": "user", "content": [text(words("question", 40), CC)]},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "f", "input": tool_input}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"}],
            },
        ]

    first = usage_of(create(sim_client, messages=messages({"a": 1, "b": 2}), cache_control=CC))
    again = usage_of(create(sim_client, messages=messages({"a": 1, "b": 2}), cache_control=CC))
    swapped = usage_of(create(sim_client, messages=messages({"b": 2, "a": 1}), cache_control=CC))
    assert again[0] == first[4]
    assert swapped[0] == 40  # only the first message, marked in both requests, is read


def settings_case(name: str) -> dict[str, Any]:
    tail = conversation(6)[3:5]  # an assistant and a user turn
    image = image_block(png(120, 60))
    with_image = copy.deepcopy(tail)
    with_image[1]["content"].insert(0, image)
    return {
        "tool_choice": {"tool_choice": {"type": "any"}},
        "parallel": {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}},
        "thinking": {"thinking": {"type": "enabled", "budget_tokens": 1024}},
        "effort": {"output_config": {"effort": "low"}},
        "image": {"append": with_image},
        "system": {"system": [text(words("other system", 60), CC)]},
        "tools": {"tools": [{**LOOKUP_TOOL, "description": "changed", "cache_control": CC}]},
        "model": {"model": OTHER},
        "speed": {"speed": "fast"},
        "format": {"output_config": {"format": {"type": "json_schema", "schema": {}}}},
        "beta": {"extra_headers": {"anthropic-beta": "some-feature-2026-01-01"}},
        "explicit default effort": {"output_config": {"effort": "high"}},
        "explicit default thinking": {"thinking": {"type": "disabled"}},
        "explicit default speed": {"speed": "standard"},
    }[name]


@pytest.mark.parametrize(
    ("change", "reads"),
    [
        ("tool_choice", "tools+system"),
        ("parallel", "tools+system"),
        ("thinking", "tools+system"),
        ("effort", "tools+system"),
        ("image", "tools+system"),
        ("system", "tools"),
        ("tools", "nothing"),
        ("model", "nothing"),
        ("speed", "tools"),
        ("format", "nothing"),
        ("beta", "nothing"),
        ("explicit default effort", "everything"),
        ("explicit default thinking", "everything"),
        ("explicit default speed", "everything"),
    ],
)
def test_settings_fold_into_the_key_at_their_level(
    sim_client: anthropic.Anthropic, change: str, reads: str
) -> None:
    system_text = words("system", 60)
    base: dict[str, Any] = {
        "max_tokens": 2000,
        "tools": [{**LOOKUP_TOOL, "cache_control": CC}],
        "system": [text(system_text, CC)],
        "messages": conversation(3),
        "tool_choice": {"type": "auto"},
        "cache_control": CC,
    }
    first = usage_of(create(sim_client, **base))
    tool_tokens = estimate_tokens(canonical_json(LOOKUP_TOOL))
    expected = {
        "everything": first[4],
        "nothing": 0,
        "tools": tool_tokens,
        "tools+system": tool_tokens + estimate_tokens(system_text),
    }[reads]
    assert first[1] == first[4]  # everything written the first time

    changed = {**base, **settings_case(change)}
    # Appending messages alone would still read the whole old prefix; the images flag
    # is what makes the messages miss.
    changed["messages"] = base["messages"] + changed.pop("append", [])
    read, w5, _, uncached, total = usage_of(create(sim_client, **changed))
    assert read == expected
    assert (w5, uncached) == (total - read, 0)
    if reads == "everything":
        assert total == first[4]


def test_appending_text_without_an_image_still_reads_the_old_prefix(
    sim_client: anthropic.Anthropic,
) -> None:
    messages = conversation(3)
    first = usage_of(create(sim_client, messages=messages, cache_control=CC))
    longer = usage_of(create(sim_client, messages=conversation(5), cache_control=CC))
    assert longer[0] == first[4] == 120


def test_entries_expire_five_minutes_after_the_last_read_started(
    sim_client: anthropic.Anthropic, sim_clock: ManualClock, sim: SimServer
) -> None:
    body = {"messages": conversation(1), "cache_control": CC}
    assert usage_of(create(sim_client, **body))[1] == 40
    sim_clock.advance(299)
    assert usage_of(create(sim_client, **body))[0] == 40  # and refreshed from now
    sim_clock.advance(299)  # 598 s after the write, 299 s after the read
    assert usage_of(create(sim_client, **body))[0] == 40
    assert sim.requests[-1].cache["breakpoints"][0]["expired"] is False
    sim_clock.advance(300)  # exactly 5 minutes after the last read: gone
    assert usage_of(create(sim_client, **body))[:2] == (0, 40)
    # The log says why: the entry's TTL passed (the API's diagnostics do not name this).
    assert sim.requests[-1].cache["breakpoints"][0]["expired"] is True


def test_one_hour_entries_outlive_five_minutes_and_then_expire(
    sim_client: anthropic.Anthropic, sim_clock: ManualClock
) -> None:
    body = {"messages": conversation(1), "cache_control": CC_1H}
    assert usage_of(create(sim_client, **body)) == (0, 0, 40, 0, 40)
    sim_clock.advance(3000)
    assert usage_of(create(sim_client, **body))[0] == 40
    sim_clock.advance(3601)
    assert usage_of(create(sim_client, **body)) == (0, 0, 40, 0, 40)


def test_mixed_ttls_split_read_1h_write_5m_write_and_uncached_tail(
    sim_client: anthropic.Anthropic, sim_clock: ManualClock
) -> None:
    system = words("system", 50)
    messages = conversation(4)
    messages[1]["content"][0]["cache_control"] = CC  # C: through message 1
    body = {"system": [text(system, CC_1H)], "messages": messages}  # B: through system

    # A = 0, B = 50, C = 130, total = 210.
    assert usage_of(create(sim_client, **body)) == (0, 80, 50, 80, 210)
    sim_clock.advance(360)  # the 5m entry is gone, the 1h one is not
    assert usage_of(create(sim_client, **body)) == (50, 80, 0, 80, 210)
    assert usage_of(create(sim_client, **body)) == (130, 0, 0, 80, 210)


def lookback_request(client: anthropic.Anthropic, appended: int, extra_marker: int | None) -> Any:
    blocks = [text(words("head", 40))]
    blocks += [text(f"tail of {appended}, block {i:03d}") for i in range(appended)]
    blocks[-1]["cache_control"] = CC
    if extra_marker is not None:
        blocks[extra_marker]["cache_control"] = CC
    return create(client, messages=[{"role": "user", "content": blocks}])


@pytest.mark.parametrize(
    ("appended", "extra_marker", "read"),
    [(19, None, 40), (20, None, 0), (25, None, 0), (20, 10, 40), (25, 6, 40)],
)
def test_a_read_looks_back_twenty_positions_and_no_further(
    sim_client: anthropic.Anthropic, appended: int, extra_marker: int | None, read: int
) -> None:
    assert usage_of(lookback_request(sim_client, 0, None))[:2] == (0, 40)
    assert usage_of(lookback_request(sim_client, appended, extra_marker))[0] == read


def test_a_prefix_below_the_minimum_is_never_written(sim_client: anthropic.Anthropic) -> None:
    short = {"messages": [{"role": "user", "content": [text(words("s", MIN - 1), CC)]}]}
    assert usage_of(create(sim_client, **short)) == (0, 0, 0, MIN - 1, MIN - 1)
    assert usage_of(create(sim_client, **short)) == (0, 0, 0, MIN - 1, MIN - 1)

    exact = {"messages": [{"role": "user", "content": [text(words("e", MIN), CC)]}]}
    assert usage_of(create(sim_client, **exact)) == (0, MIN, 0, 0, MIN)
    assert usage_of(create(sim_client, **exact)) == (MIN, 0, 0, 0, MIN)


MODELS = ("claude-sonnet-4-6", "claude-haiku-4-5", "claude-opus-4-7", "claude-opus-4-8")


def test_minimum_lengths_come_from_the_packaged_model_table() -> None:
    body = {"max_tokens": 10, "messages": conversation(1, tokens=2000), "cache_control": CC}
    with (
        SimServer(responder="echo") as server,
        anthropic.Anthropic(base_url=server.base_url, api_key="test") as client,
    ):
        written = {
            model: usage_of(client.messages.create(model=model, **body))[1] for model in MODELS
        }
    # 2048 (observed; the page says 1024), 4096, 2048, 1024 minimum; each model its own cache.
    assert written == {
        "claude-sonnet-4-6": 0,
        "claude-haiku-4-5": 0,
        "claude-opus-4-7": 0,
        "claude-opus-4-8": 2000,
    }


THOUGHT = words("thought", 40)
THINKING = {"type": "enabled", "budget_tokens": 1024}


def tool_loop() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [text(words("question", 40), CC)]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": THOUGHT, "signature": "sig-1"},
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"a": "x"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": words("result", 40),
                    "cache_control": CC,
                }
            ],
        },
    ]


def next_turn() -> list[dict[str, Any]]:
    return [
        *tool_loop(),
        {"role": "assistant", "content": [text(words("answer", 40))]},
        {"role": "user", "content": [text(words("next question", 40), CC)]},
    ]


@pytest.mark.parametrize("model", [LAST_TURN, STANDARD])
def test_last_turn_models_strip_earlier_thinking_and_miss_from_there(
    sim_client: anthropic.Anthropic, model: str
) -> None:
    body = {"model": model, "max_tokens": 2000, "thinking": THINKING}
    # Mid tool loop (the last user message holds only tool results): thinking is kept.
    loop = usage_of(create(sim_client, messages=tool_loop(), **body))
    assert loop[1] == loop[4]

    read, _, _, _, total = usage_of(create(sim_client, messages=next_turn(), **body))
    counted = sim_client.messages.count_tokens(model=model, messages=next_turn(), thinking=THINKING)
    assert counted.input_tokens == total
    if model == LAST_TURN:
        assert read == 40  # only the first user message survives the stripped thinking
        assert total == loop[4] - estimate_tokens(THOUGHT) + 80
    else:
        assert read == loop[4]
        assert total == loop[4] + 80


def test_usage_always_adds_up_to_count_tokens(sim_client: anthropic.Anthropic) -> None:
    body = {
        "tools": [LOOKUP_TOOL],
        "system": "a plain system string",
        "messages": next_turn(),
        "thinking": THINKING,
    }
    counted = sim_client.messages.count_tokens(model=STANDARD, **body).input_tokens
    for _ in range(2):
        assert usage_of(create(sim_client, max_tokens=2000, **body))[4] == counted


def test_rewriting_an_expired_one_hour_entry_with_a_five_minute_marker_lives_five_minutes(
    sim_client: anthropic.Anthropic, sim_clock: ManualClock
) -> None:
    messages = conversation(1)
    assert usage_of(create(sim_client, messages=messages, cache_control=CC_1H)) == (0, 0, 40, 0, 40)
    sim_clock.advance(3600)  # the 1h entry is gone
    assert usage_of(create(sim_client, messages=messages, cache_control=CC)) == (0, 40, 0, 0, 40)
    sim_clock.advance(299)
    assert usage_of(create(sim_client, messages=messages, cache_control=CC))[0] == 40
    sim_clock.advance(300)  # 5 minutes after that read: the new entry lives 5m, not 1h
    assert usage_of(create(sim_client, messages=messages, cache_control=CC)) == (0, 40, 0, 0, 40)


def test_a_cache_control_key_inside_tool_input_or_schema_is_content_not_a_marker(
    sim_client: anthropic.Anthropic,
) -> None:
    def messages(value: str) -> list[dict[str, Any]]:
        tool_input = {"url": "https://example.com", "cache_control": value}
        return [
            {"role": "user", "content": [text(words("question", 40), CC)]},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "f", "input": tool_input}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"}],
            },
        ]

    first = usage_of(create(sim_client, messages=messages("no-store"), cache_control=CC))
    assert (
        usage_of(create(sim_client, messages=messages("no-store"), cache_control=CC))[0] == first[4]
    )
    changed = usage_of(create(sim_client, messages=messages("max-age=60"), cache_control=CC))
    assert changed[0] == 40  # only the first message is unchanged

    schema = {"type": "object", "properties": {"cache_control": {"type": "string"}}}
    tool = {"name": "fetch", "input_schema": schema}
    counted = sim_client.messages.count_tokens(
        model=STANDARD, tools=[tool], messages=[{"role": "user", "content": "x"}]
    )
    assert counted.input_tokens == estimate_tokens(canonical_json(tool)) + 1
