"""The shared token estimate and how a block is counted with it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.tokens import block_tokens, canonical_json, estimate_tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("a", 1),
        ("abcd", 1),
        ("abcde", 2),
        ("é", 1),  # one code point, two UTF-8 bytes
        ("e\u0301", 1),  # two code points that display as one character
        ("🙂🙂🙂🙂", 1),  # four code points outside the BMP
        ("x" * 48_000, 12_000),  # a full cold-path page
        ("x" * 48_001, 12_001),
    ],
)
def test_estimate_is_ceil_of_code_points_over_four(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


@settings(max_examples=100, deadline=None)
@given(st.text(), st.text())
def test_estimate_matches_the_sql_rule_and_never_rewards_splitting(a: str, b: str) -> None:
    # SQL: ceil(char_length(text) / 4.0); char_length counts code points.
    assert estimate_tokens(a) == math.ceil(len(a) / 4.0)
    assert estimate_tokens(a + b) <= estimate_tokens(a) + estimate_tokens(b)


def test_text_bearing_blocks_count_their_text() -> None:
    assert block_tokens({"type": "text", "text": "x" * 9}) == 3
    assert (
        block_tokens({"type": "text", "text": "x" * 9, "cache_control": {"type": "ephemeral"}}) == 3
    )
    assert block_tokens({"type": "thinking", "thinking": "x" * 8, "signature": "s" * 400}) == 2
    assert block_tokens({"type": "redacted_thinking", "data": "x" * 12}) == 3


def test_tool_blocks_count_name_and_canonical_input() -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}
    assert block_tokens(use) == estimate_tokens('f{"a":1}')
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "text", "text": "x" * 8}, {"type": "text", "text": "y" * 5}],
    }
    assert block_tokens(result) == 2 + 2
    assert block_tokens({**result, "content": "x" * 7}) == 2


def test_other_blocks_count_their_canonical_json_without_markers() -> None:
    tool = {"name": "f", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}
    assert block_tokens(tool) == estimate_tokens('{"name":"f","input_schema":{"type":"object"}}')


def test_canonical_json_keeps_key_order_and_characters() -> None:
    assert canonical_json({"b": 1, "a": "é"}) == '{"b":1,"a":"é"}'
