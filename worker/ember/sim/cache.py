"""Prompt-cache accounting, as ``shared/anthropic-cache-rules.md`` describes it.

A request becomes a ``Prompt``: a sequence of positions (tool definitions, then
system blocks, then message content blocks), each with an estimated token count
and a cumulative key. ``CacheStore.plan`` decides what the request reads and
writes at the request's start; ``CacheStore.commit`` applies it once the response
starts, which is when Anthropic makes a new entry readable. A request that never
answers (a fault, a hang) therefore neither writes nor refreshes anything.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from ..tokens import block_tokens, canonical_json, strip_cache_control
from .models import ModelInfo
from .validate import marker_ttl

LOOKBACK = 20  # a read checks the breakpoint's position and 19 earlier ones
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
THINKING_KINDS = ("thinking", "redacted_thinking")


@dataclass(frozen=True)
class Position:
    index: int
    where: str  # "tools.0", "system.1", "messages.3.content.0"
    kind: str
    tokens: int
    cumulative: int  # tokens from the first position through this one
    key: str  # hash of everything up to and including this position
    ttl: str | None  # the breakpoint's TTL, None when this is not a breakpoint


@dataclass(frozen=True)
class Prompt:
    model: str
    positions: tuple[Position, ...]
    stripped: tuple[str, ...] = ()  # thinking blocks dropped by last-turn retention

    @property
    def total_tokens(self) -> int:
        return self.positions[-1].cumulative if self.positions else 0

    @property
    def breakpoints(self) -> list[Position]:
        return [p for p in self.positions if p.ttl is not None]


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        # surrogatepass: a JSON body may carry lone surrogates ("\ud800"), still content.
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def _settings(value: Any) -> str:
    # Settings are request parameters compared by value, so their key order is irrelevant.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _content_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """System and message content blocks, with the blocks nested in tool results.

    Only blocks count for the settings flags: a tool's input that happens to hold
    ``{"type": "image"}`` is content, not an image.
    """
    found: list[dict[str, Any]] = []
    for message in body["messages"]:
        for block in _as_blocks(message["content"]):
            found.append(block)
            nested = block.get("content") if block.get("type") == "tool_result" else None
            if isinstance(nested, list):
                found.extend(b for b in nested if isinstance(b, dict))
    return found + _as_blocks(body.get("system"))


def _level_settings(body: dict[str, Any]) -> tuple[str, str]:
    """The settings folded into system positions and into message positions.

    Model and tool definitions affect everything; they are the root of the key
    and the first positions. Web search and citations affect system and messages;
    tool_choice, thinking, effort and the presence of images affect messages only.
    """
    tools = body.get("tools") or []
    blocks = _content_blocks(body)
    citations = any(
        isinstance(b.get("citations"), dict) and bool(b["citations"].get("enabled")) for b in blocks
    )
    web_search = any(str(t.get("type", "")).startswith("web_search") for t in tools)
    system = _settings({"citations": citations, "web_search": web_search})
    output_config = body.get("output_config")
    effort = output_config.get("effort") if isinstance(output_config, dict) else None
    messages = _settings(
        {
            "tool_choice": body.get("tool_choice") or {"type": "auto"},
            "thinking": body.get("thinking") or {"type": "disabled"},
            "effort": effort,
            "images": any(b.get("type") == "image" for b in blocks),
        }
    )
    return system, system + messages


def _as_blocks(content: Any) -> list[dict[str, Any]]:
    # A plain string counts as one text block; an empty system string is no block.
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content or [])


def _explicit_ttl(block: dict[str, Any], where: str) -> str | None:
    # "cache_control": null is no marker, as the API types every marker as optional.
    if block.get("cache_control") is not None:
        return marker_ttl(block["cache_control"], where)
    if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
        for part in block["content"]:
            if isinstance(part, dict) and part.get("cache_control") is not None:
                return marker_ttl(part["cache_control"], where)
    return None


def _stripped_messages(body: dict[str, Any]) -> set[int]:
    """Assistant messages whose thinking a last-turn-only model drops.

    A user message holding anything besides tool results starts a new turn; all
    thinking before the last such message is stripped.
    """
    messages = body["messages"]
    last_turn = -1
    for i, message in enumerate(messages):
        blocks = _as_blocks(message["content"])
        if message["role"] == "user" and any(b.get("type") != "tool_result" for b in blocks):
            last_turn = i
    return {i for i in range(last_turn) if messages[i]["role"] == "assistant"}


def build_prompt(body: dict[str, Any], info: ModelInfo) -> Prompt:
    """The positions of a validated request, keys and breakpoints included."""
    system_settings, message_settings = _level_settings(body)
    strip = _stripped_messages(body) if info.thinking_retention == "last-turn" else set()

    # (where, block, context) in prompt order; the context folds in role and settings.
    items: list[tuple[str, dict[str, Any], str]] = []
    for j, tool in enumerate(body.get("tools") or []):
        items.append((f"tools.{j}", tool, "tool"))
    for j, block in enumerate(_as_blocks(body.get("system"))):
        items.append((f"system.{j}", block, "system" + system_settings))
    stripped: list[str] = []
    for i, message in enumerate(body["messages"]):
        first = True
        for j, block in enumerate(_as_blocks(message["content"])):
            where = f"messages.{i}.content.{j}"
            if i in strip and block.get("type") in THINKING_KINDS:
                stripped.append(where)
                continue
            # The role and message boundary are part of the prefix: the same text as
            # a user or an assistant turn, or split across two turns, is not the same.
            boundary = f"{message['role']}:{'start' if first else 'cont'}"
            items.append((where, block, boundary + message_settings))
            first = False

    key = _digest("ember-sim-cache-v1", info.name, str(body.get("workspace_id") or ""))
    positions: list[Position] = []
    cumulative = 0
    for index, (where, block, context) in enumerate(items):
        key = _digest(key, context, canonical_json(strip_cache_control(block)))
        tokens = block_tokens(block)
        cumulative += tokens
        kind = str(block.get("type", "tool" if where.startswith("tools") else ""))
        ttl = _explicit_ttl(block, where)
        positions.append(Position(index, where, kind, tokens, cumulative, key, ttl))

    automatic = body.get("cache_control")
    if automatic is not None:
        _place_automatic(positions, marker_ttl(automatic, "(top level)"))
    return Prompt(model=info.name, positions=tuple(positions), stripped=tuple(stripped))


def _place_automatic(positions: list[Position], ttl: str) -> None:
    """Top-level cache_control marks the last block that may carry a marker."""
    for n in range(len(positions) - 1, -1, -1):
        p = positions[n]
        if p.kind in THINKING_KINDS or (p.kind == "text" and p.tokens == 0):
            continue
        if p.ttl is None:  # an explicit marker on the same block keeps its own TTL
            positions[n] = Position(p.index, p.where, p.kind, p.tokens, p.cumulative, p.key, ttl)
        return


@dataclass
class Entry:
    ttl: float
    expires_at: float
    visible_at: float  # when the writer's response started
    tokens: int

    def live(self, now: float) -> bool:
        return self.visible_at <= now < self.expires_at


@dataclass(frozen=True)
class Write:
    key: str
    ttl: float
    tokens: int
    where: str


@dataclass(frozen=True)
class CachePlan:
    """What one request reads and writes, decided at its start."""

    started_at: float
    usage: dict[str, Any]
    read_from: Position | None
    refreshes: tuple[str, ...]
    writes: tuple[Write, ...]
    detail: dict[str, Any] = field(default_factory=dict)


def usage_dict(read: int, write_5m: int, write_1h: int, uncached: int) -> dict[str, Any]:
    return {
        "input_tokens": uncached,
        "cache_creation_input_tokens": write_5m + write_1h,
        "cache_read_input_tokens": read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": write_5m,
            "ephemeral_1h_input_tokens": write_1h,
        },
        "output_tokens": 0,
    }


class CacheStore:
    """Cache entries by cumulative key; the model is part of every key."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def plan(self, prompt: Prompt, info: ModelInfo, now: float) -> CachePlan:
        with self._lock:
            self._purge(now)
            hits: dict[str, Position] = {}  # breakpoint where -> position read there
            for bp in prompt.breakpoints:
                for j in range(bp.index, max(-1, bp.index - LOOKBACK), -1):
                    entry = self._entries.get(prompt.positions[j].key)
                    if entry is not None and entry.live(now):
                        hits[bp.where] = prompt.positions[j]
                        break
        read_from = max(hits.values(), key=lambda p: p.index, default=None)
        after = -1 if read_from is None else read_from.index
        written = [
            bp
            for bp in prompt.breakpoints
            if bp.index > after and bp.cumulative >= info.min_cacheable_tokens
        ]
        a = 0 if read_from is None else read_from.cumulative
        b = max((bp.cumulative for bp in written if bp.ttl == "1h"), default=a)
        c = max((bp.cumulative for bp in written), default=a)
        usage = usage_dict(read=a, write_5m=c - b, write_1h=b - a, uncached=prompt.total_tokens - c)
        detail = {
            "positions": len(prompt.positions),
            "total_input_tokens": prompt.total_tokens,
            "read_from": None if read_from is None else read_from.where,
            "breakpoints": [
                {
                    "where": bp.where,
                    "ttl": bp.ttl,
                    "prefix_tokens": bp.cumulative,
                    "hit": hits[bp.where].where if bp.where in hits else None,
                    "written": bp in written,
                    "below_minimum": bp.cumulative < info.min_cacheable_tokens,
                }
                for bp in prompt.breakpoints
            ],
            "stripped_thinking": list(prompt.stripped),
        }
        return CachePlan(
            started_at=now,
            usage=usage,
            read_from=read_from,
            refreshes=tuple(sorted({p.key for p in hits.values()})),
            writes=tuple(
                Write(bp.key, TTL_SECONDS[bp.ttl or "5m"], bp.cumulative, bp.where)
                for bp in written
            ),
            detail=detail,
        )

    def commit(self, plan: CachePlan, response_started_at: float) -> None:
        """Refresh what was read and make what was written readable, from now on."""
        with self._lock:
            for key in plan.refreshes:
                entry = self._entries.get(key)
                if entry is not None:
                    entry.expires_at = max(entry.expires_at, plan.started_at + entry.ttl)
            for w in plan.writes:
                expires = plan.started_at + w.ttl
                entry = self._entries.get(w.key)
                if entry is None or entry.expires_at <= plan.started_at:
                    # A new entry, or one that had expired when this request started:
                    # nothing of the old one (its TTL above all) carries over.
                    self._entries[w.key] = Entry(w.ttl, expires, response_started_at, w.tokens)
                    continue
                # Written concurrently by requests that could not yet see each other.
                entry.ttl = max(entry.ttl, w.ttl)
                entry.expires_at = max(entry.expires_at, expires)
                entry.visible_at = min(entry.visible_at, response_started_at)

    def _purge(self, now: float) -> None:
        # Entries long past their expiry can never be read or refreshed again.
        if len(self._entries) < 4096:
            return
        for key in [k for k, e in self._entries.items() if e.expires_at + 3600 < now]:
            del self._entries[key]
