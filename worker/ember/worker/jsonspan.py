"""Where each value sits in a JSON text, so a stored request can be extended without rewriting it.

The hot path must send the host's request byte for byte (anthropic-cache-rules.md, "Replaying a
request byte for byte"): decoding it and encoding it again could change nested key order, number
spelling or escapes. Instead the text is scanned once for the character spans of the values the
builder needs, and new text is spliced in at those offsets; every other character stays put.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_scanstring = json.decoder.scanstring  # type: ignore[attr-defined]


@dataclass
class Span:
    """A JSON value at text[start:end]; `keys` (objects) or `items` (arrays) hold its children."""

    start: int
    end: int
    kind: str  # object, array, string, number, literal
    keys: dict[str, Span] = field(default_factory=dict)
    items: list[Span] = field(default_factory=list)

    def text(self, source: str) -> str:
        return source[self.start : self.end]

    def value(self, source: str) -> Any:
        return json.loads(self.text(source))


class SpanError(ValueError):
    pass


def scan(text: str) -> Span:
    """The span tree of a whole JSON document (surrounding whitespace allowed)."""
    span, pos = _value(text, _WS.match(text, 0).end())  # type: ignore[union-attr]
    if _WS.match(text, pos).end() != len(text):  # type: ignore[union-attr]
        raise SpanError(f"extra data after the JSON value at offset {pos}")
    return span


def _skip(text: str, pos: int) -> int:
    return _WS.match(text, pos).end()  # type: ignore[union-attr]


def _value(text: str, pos: int) -> tuple[Span, int]:
    if pos >= len(text):
        raise SpanError("unexpected end of JSON text")
    ch = text[pos]
    if ch == "{":
        return _object(text, pos)
    if ch == "[":
        return _array(text, pos)
    if ch == '"':
        _, end = _scanstring(text, pos + 1, True)
        return Span(pos, end, "string"), end
    for literal in ("true", "false", "null"):
        if text.startswith(literal, pos):
            return Span(pos, pos + len(literal), "literal"), pos + len(literal)
    m = _NUMBER.match(text, pos)
    if m:
        return Span(pos, m.end(), "number"), m.end()
    raise SpanError(f"unexpected character {ch!r} at offset {pos}")


def _object(text: str, pos: int) -> tuple[Span, int]:
    span = Span(pos, pos, "object")
    pos = _skip(text, pos + 1)
    if text[pos : pos + 1] == "}":
        span.end = pos + 1
        return span, pos + 1
    while True:
        if text[pos : pos + 1] != '"':
            raise SpanError(f"expected a key at offset {pos}")
        key, pos = _scanstring(text, pos + 1, True)
        pos = _skip(text, pos)
        if text[pos : pos + 1] != ":":
            raise SpanError(f"expected ':' at offset {pos}")
        child, pos = _value(text, _skip(text, pos + 1))
        span.keys[key] = child
        pos = _skip(text, pos)
        if text[pos : pos + 1] == ",":
            pos = _skip(text, pos + 1)
            continue
        if text[pos : pos + 1] == "}":
            span.end = pos + 1
            return span, pos + 1
        raise SpanError(f"expected ',' or '}}' at offset {pos}")


def _array(text: str, pos: int) -> tuple[Span, int]:
    span = Span(pos, pos, "array")
    pos = _skip(text, pos + 1)
    if text[pos : pos + 1] == "]":
        span.end = pos + 1
        return span, pos + 1
    while True:
        child, pos = _value(text, pos)
        span.items.append(child)
        pos = _skip(text, pos)
        if text[pos : pos + 1] == ",":
            pos = _skip(text, pos + 1)
            continue
        if text[pos : pos + 1] == "]":
            span.end = pos + 1
            return span, pos + 1
        raise SpanError(f"expected ',' or ']' at offset {pos}")


def splice(text: str, edits: list[tuple[int, int, str]]) -> str:
    """`text` with each (start, end, replacement) applied; edits must not overlap."""
    out: list[str] = []
    pos = 0
    for start, end, replacement in sorted(edits, key=lambda e: (e[0], e[1])):
        if start < pos:
            raise SpanError("overlapping edits")
        out.append(text[pos:start])
        out.append(replacement)
        pos = end
    out.append(text[pos:])
    return "".join(out)
