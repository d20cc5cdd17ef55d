"""Ember's token estimate: one deterministic rule shared by Python and SQL.

This is **not** a tokenizer. No public tokenizer matches current Claude models, and
Ember needs two components (the SQL page splitter and the simulator) to agree
exactly on how long a text is, more than it needs either to match Anthropic's
count. So the rule is deliberately simple:

    estimate_tokens(text) = ceil(number of Unicode code points / 4)

and 0 for the empty string. SQL implements the same rule as
``ember.estimate_tokens(text) = ceil(char_length(text) / 4.0)``, so a cold-path
page of 12,000 estimated tokens is 12,000 tokens to the simulator too.

A content block is counted over its text-bearing content (``block_tokens``):

- ``text``: its ``text``;
- ``thinking``: its ``thinking`` (the signature is opaque and not counted);
- ``redacted_thinking``: its ``data``;
- ``tool_use`` / ``server_tool_use``: its ``name`` followed by the canonical JSON of its ``input``;
- ``tool_result``: the sum over its content (a string, or blocks counted by these rules);
- ``image`` and ``document``: by size, never by the length of their base64 text
  (``ember.media``: about width x height / 750 for an image, 1,500 a PDF page);
- anything else (tool definitions, unknown blocks): the canonical JSON of the block
  without ``cache_control``.

Canonical JSON (``canonical_json``) is compact (no whitespace between tokens),
keeps non-ASCII characters as they are and keeps every object's key order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .media import document_block_tokens, image_block_tokens

__all__ = ["block_tokens", "canonical_json", "estimate_tokens", "strip_cache_control"]


def estimate_tokens(text: str) -> int:
    """ceil(code points / 4); 0 for the empty string. Python's len() counts code points."""
    return (len(text) + 3) // 4


def strip_cache_control(block: Any) -> Any:
    """A copy of a block (or tool definition) without its cache markers, key order kept.

    Markers never count as content: moving one must not change a prefix or its length.
    A marker sits on the block itself or, in a ``tool_result``, on one of its content
    blocks. Anywhere else (a tool's ``input_schema``, a ``tool_use`` input) a key named
    ``cache_control`` is content like any other and stays.
    """
    if not isinstance(block, Mapping):
        return block
    copy = {k: v for k, v in block.items() if k != "cache_control"}
    if copy.get("type") == "tool_result" and isinstance(copy.get("content"), list):
        copy["content"] = [
            {k: v for k, v in part.items() if k != "cache_control"}
            if isinstance(part, Mapping)
            else part
            for part in copy["content"]
        ]
    return copy


def canonical_json(value: Any) -> str:
    """Compact JSON that keeps key order and non-ASCII text, so whitespace never matters
    but nested key order and every character of content do."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def block_tokens(block: Any) -> int:
    """Estimated tokens of one content block or tool definition (rules in the module doc)."""
    if isinstance(block, str):
        return estimate_tokens(block)
    if not isinstance(block, Mapping):
        return estimate_tokens(canonical_json(block))
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return estimate_tokens(block["text"])
    if kind == "thinking" and isinstance(block.get("thinking"), str):
        return estimate_tokens(block["thinking"])
    if kind == "redacted_thinking" and isinstance(block.get("data"), str):
        return estimate_tokens(block["data"])
    if kind in ("tool_use", "server_tool_use"):
        name = block.get("name")
        name_text = name if isinstance(name, str) else ""
        return estimate_tokens(name_text + canonical_json(block.get("input", {})))
    if kind == "image":
        return image_block_tokens(block)
    if kind == "document":
        return document_block_tokens(block)
    if kind == "tool_result":
        content = block.get("content", "")
        if isinstance(content, list):
            return sum(block_tokens(part) for part in content)
        return block_tokens(content) if isinstance(content, str) else 0
    return estimate_tokens(canonical_json(strip_cache_control(block)))
