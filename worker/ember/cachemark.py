"""The history cache breakpoint: one `cache_control` marker on the last message of a request.

A request's cache entry is written only at its breakpoints. A host that marks only its system
prompt caches that much and no more, so the shadow replay of its request (the old prefix plus a
tail) can read only the system prompt from the cache and pays for every message again. A
marker on the last message caches the whole request, for the host's own next turn as much as
for the replay, and markers are not part of the cache key, so adding one changes nothing else
(anthropic-cache-rules.md, "What the cache keys on").

The marker is spliced into the JSON text at one offset (`ember.worker.jsonspan`): every other
byte of the request stays as the client wrote it. The hot path's builder and `ember.host`'s
capture share this code, so both put the marker in the same place.
"""

from __future__ import annotations

import json
from typing import Any

from ember.worker.jsonspan import Span, SpanError, scan, splice

MAX_MARKERS = 4
# Markers may not sit on these blocks (a 400 from the API).
_UNMARKABLE = ("thinking", "redacted_thinking")

Edit = tuple[int, int, str]


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def count_markers(value: Any) -> int:
    """Block-level cache_control markers: on blocks of tools, system, messages and tool results."""
    count = 0
    if isinstance(value, list):
        for item in value:
            count += count_markers(item)
    elif isinstance(value, dict):
        if value.get("cache_control") is not None:
            count += 1
        # A tool_result's nested blocks may carry the marker; tool inputs and schemas are content.
        if value.get("type") == "tool_result" and isinstance(value.get("content"), list):
            count += count_markers(value["content"])
    return count


def request_markers(parsed: dict[str, Any]) -> int:
    """Every breakpoint of a request, the automatic one (top-level cache_control) included."""
    markers = count_markers(parsed.get("tools")) + count_markers(parsed.get("system"))
    markers += sum(
        count_markers(m.get("content")) for m in parsed.get("messages") or [] if isinstance(m, dict)
    )
    return markers + (1 if parsed.get("cache_control") is not None else 0)


def markable(block: Any) -> bool:
    if not isinstance(block, dict) or block.get("type") in _UNMARKABLE:
        return False
    return not (block.get("type") == "text" and block.get("text") == "")


def last_message_marker(
    text: str, request: Span, parsed: dict[str, Any], *, string_content: bool = False
) -> Edit | None:
    """The edit that puts a marker on the last markable block of the last message, or None.

    None when that block already has a marker, when the request already holds four, or when
    the last message has nothing markable. With `string_content`, a last message whose content is
    a plain string becomes one text block carrying the marker, its string copied as written (the
    API counts a string as one text block, so the cache key is the same).
    """
    messages = request.keys.get("messages")
    items = parsed.get("messages")
    if messages is None or messages.kind != "array" or not messages.items or not items:
        return None
    if request_markers(parsed) >= MAX_MARKERS:
        return None
    last_span, last = messages.items[-1], items[-1]
    if not isinstance(last, dict) or "content" not in last_span.keys:
        return None
    content, content_span = last["content"], last_span.keys["content"]
    # 1h entries must come before 5m ones; a 1h automatic marker after ours forces 1h.
    top_level = parsed.get("cache_control")
    ttl_1h = isinstance(top_level, dict) and top_level.get("ttl") == "1h"
    marker = {"type": "ephemeral", "ttl": "1h"} if ttl_1h else {"type": "ephemeral"}
    if isinstance(content, str):
        if not string_content or not content.strip():
            return None
        literal = content_span.text(text)
        block = f'[{{"type":"text","text":{literal},"cache_control":{_compact(marker)}}}]'
        return (content_span.start, content_span.end, block)
    if not isinstance(content, list):
        return None
    for index in range(len(content) - 1, -1, -1):
        if not markable(content[index]):
            continue
        if content[index].get("cache_control") is not None:
            return None
        block_span = content_span.items[index]
        if "cache_control" in block_span.keys:  # an explicit null: replace the value
            null = block_span.keys["cache_control"]
            return (null.start, null.end, _compact(marker))
        close = block_span.end - 1
        sep = "," if block_span.keys else ""
        return (close, close, f'{sep}"cache_control":{_compact(marker)}')
    return None


def mark_history(body: bytes) -> bytes | None:
    """The request with the history breakpoint on its last message, or None to send it as is.

    Left alone: a body that is not a JSON request with messages, one whose last message already
    has its marker, one with four breakpoints, and one with a top-level `cache_control` (the
    API's automatic breakpoint already sits on its last block).
    """
    try:
        text = body.decode("utf-8")
        request = scan(text)
        parsed = json.loads(text)
    except (UnicodeDecodeError, SpanError, ValueError):
        return None
    if request.kind != "object" or not isinstance(parsed, dict):
        return None
    if parsed.get("cache_control") is not None:
        return None
    edit = last_message_marker(text, request, parsed, string_content=True)
    if edit is None:
        return None
    return splice(text, [edit]).encode("utf-8")
