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
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ..tokens import block_tokens, canonical_json, strip_cache_control
from .errors import invalid
from .models import ModelInfo
from .validate import marker_ttl

LOOKBACK = 20  # a read checks the breakpoint's position and 19 earlier ones
# Within this fraction of a model's minimum cacheable length the outcome rests on the
# real tokenizer, which the estimate only approximates: the log says near_minimum.
NEAR_MINIMUM_MARGIN = 0.25
# A run of consecutive blocks of one of these kinds is one position for the lookback.
RUN_KINDS = ("tool_use", "tool_result")
DEFAULT_EFFORT = "high"
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
    slot: int = 0  # lookback position: a run of tool_use or tool_result blocks shares one


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


def _thinking_settings(body: dict[str, Any]) -> dict[str, Any]:
    """Thinking mode, budget and effort, with an explicit default equal to leaving it out."""
    thinking = body.get("thinking") or {"type": "disabled"}
    if isinstance(thinking, dict) and "block_binding" in thinking:
        # What happens to a failing thinking block is a control, not something the model sees.
        thinking = {k: v for k, v in thinking.items() if k != "block_binding"}
    output_config = body.get("output_config")
    effort = output_config.get("effort") if isinstance(output_config, dict) else None
    return {"thinking": thinking, "effort": effort or DEFAULT_EFFORT}


def _level_settings(body: dict[str, Any], info: ModelInfo, betas: Iterable[str]) -> list[str]:
    """The settings folded into the key at the root, at system and at message positions.

    Root (everything): model, workspace, ``anthropic-beta`` features and
    ``output_config.format``; thinking and effort too on a model that renders its
    thinking configuration before the system prompt. System and messages: web search,
    citations and ``speed``. Messages only: ``tool_choice``, thinking, effort and
    how many images the request holds.
    """
    tools = body.get("tools") or []
    blocks = _content_blocks(body)
    citations = any(
        isinstance(b.get("citations"), dict) and bool(b["citations"].get("enabled")) for b in blocks
    )
    web_search = any(str(t.get("type", "")).startswith("web_search") for t in tools)
    output_config = body.get("output_config")
    root_settings: dict[str, Any] = {
        "betas": sorted({b.strip() for b in betas if b.strip()}),
        "format": output_config.get("format") if isinstance(output_config, dict) else None,
    }
    message_settings: dict[str, Any] = {
        "tool_choice": body.get("tool_choice") or {"type": "auto"},
        # The page: adding or removing images anywhere invalidates the messages. The
        # count, not only their presence, so a second image misses too (the strict side).
        "images": sum(1 for b in blocks if b.get("type") == "image"),
    }
    if info.thinking_before_system:
        root_settings.update(_thinking_settings(body))
    else:
        message_settings.update(_thinking_settings(body))
    system = _settings(
        {
            "citations": citations,
            "web_search": web_search,
            "speed": body.get("speed") or "standard",
        }
    )
    root = _settings(root_settings)
    return [root, system, system + _settings(message_settings)]


def _as_blocks(content: Any) -> list[dict[str, Any]]:
    # A plain string counts as one text block; an empty system string is no block.
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content or [])


def _ttl(block: dict[str, Any], where: str) -> str | None:
    # "cache_control": null is no marker, as the API types every marker as optional.
    if block.get("cache_control") is not None:
        return marker_ttl(block["cache_control"], where)
    return None


def _parts(where: str, block: dict[str, Any]) -> list[tuple[str, str, int, str | None]]:
    """(where, keyed JSON, tokens, marker TTL) of the positions one block makes.

    A block is one position, except a ``tool_result`` whose content is a list: each of
    its content blocks is a position, so a marker on one of them marks the prefix
    through that block only (as a marker anywhere else does), and a marker on the
    tool result itself marks its last content block. The tool result's own fields
    (``tool_use_id``, ``is_error``) are keyed with its first content block.
    """
    content = block.get("content")
    if block.get("type") != "tool_result" or not isinstance(content, list) or not content:
        return [
            (
                where,
                canonical_json(strip_cache_control(block)),
                block_tokens(block),
                _ttl(block, where),
            )
        ]
    header = {k: v for k, v in block.items() if k not in ("content", "cache_control")}
    parts: list[tuple[str, str, int, str | None]] = []
    for k, part in enumerate(content):
        part_where = f"{where}.content.{k}"
        keyed = canonical_json(strip_cache_control(part))
        if k == 0:
            keyed = canonical_json(header) + keyed
        parts.append((part_where, keyed, block_tokens(part), _ttl(part, part_where)))
    own = _ttl(block, where)
    if own is not None:
        last_where, keyed, tokens, nested = parts[-1]
        if nested is not None and nested != own:
            raise invalid(f"{last_where}.cache_control: differs from the tool_result's own marker")
        parts[-1] = (last_where, keyed, tokens, own)
    return parts


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


def build_prompt(body: dict[str, Any], info: ModelInfo, betas: Iterable[str] = ()) -> Prompt:
    """The positions of a validated request, keys and breakpoints included.

    ``betas`` are the request's ``anthropic-beta`` features: each one is part of the key.
    """
    root_settings, system_settings, message_settings = _level_settings(body, info, betas)
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

    workspace = str(body.get("workspace_id") or "")
    key = _digest("ember-sim-cache-v2", info.name, workspace, root_settings)
    positions: list[Position] = []
    cumulative = 0
    slot = -1
    for where, block, context in items:
        kind = str(block.get("type", "tool" if where.startswith("tools") else ""))
        for part_where, part_key, tokens, ttl in _parts(where, block):
            key = _digest(key, context, part_key)
            cumulative += tokens
            # Consecutive tool_use blocks, or tool_result blocks (the parts of one
            # included), count as one position for the lookback.
            if not (positions and kind in RUN_KINDS and positions[-1].kind == kind):
                slot += 1
            index = len(positions)
            positions.append(Position(index, part_where, kind, tokens, cumulative, key, ttl, slot))

    automatic = body.get("cache_control")
    if automatic is not None:
        _place_automatic(positions, marker_ttl(automatic, "(top level)"))
    return Prompt(model=info.name, positions=tuple(positions), stripped=tuple(stripped))


def _place_automatic(positions: list[Position], ttl: str) -> None:
    """Top-level cache_control marks the last block that may carry a marker.

    An explicit marker on that block with the same TTL is the same breakpoint; one with
    a different TTL contradicts the top-level marker, and the API refuses the request.
    """
    for n in range(len(positions) - 1, -1, -1):
        p = positions[n]
        if p.kind in THINKING_KINDS or (p.kind == "text" and p.tokens == 0):
            continue
        if p.ttl is None:
            positions[n] = replace(p, ttl=ttl)
        elif p.ttl != ttl:
            raise invalid(
                f"{p.where}.cache_control: its ttl ({p.ttl!r}) differs from the top-level "
                f"cache_control ttl ({ttl!r}) that applies to the same last block; give "
                "them the same ttl or drop one of them"
            )
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
                for j in range(bp.index, -1, -1):
                    if bp.slot - prompt.positions[j].slot >= LOOKBACK:
                        break
                    entry = self._entries.get(prompt.positions[j].key)
                    if entry is not None and entry.live(now):
                        hits[bp.where] = prompt.positions[j]
                        break
        read_from = max(hits.values(), key=lambda p: p.index, default=None)
        after = -1 if read_from is None else read_from.index
        # The API caches nothing below the larger of the documented and observed minimums; a
        # model for which neither is known caches nothing here (the simulator cannot say).
        minimum = info.cache_minimum
        written = [
            bp
            for bp in prompt.breakpoints
            if bp.index > after and minimum is not None and bp.cumulative >= minimum
        ]
        a = 0 if read_from is None else read_from.cumulative
        b = max((bp.cumulative for bp in written if bp.ttl == "1h"), default=a)
        c = max((bp.cumulative for bp in written), default=a)
        usage = usage_dict(read=a, write_5m=c - b, write_1h=b - a, uncached=prompt.total_tokens - c)
        known = [m for m in (info.min_cacheable_tokens, info.observed_min_cacheable_tokens) if m]
        # Where the documented and the observed minimum differ, everything between is uncertain.
        margin = (minimum or 0) * NEAR_MINIMUM_MARGIN
        low = min(known, default=0) - margin
        high = max(known, default=0) + margin

        def near(tokens: int) -> bool:
            return bool(known) and low <= tokens <= high

        detail = {
            "positions": len(prompt.positions),
            "min_cacheable_tokens": minimum,
            "near_minimum": any(near(bp.cumulative) for bp in prompt.breakpoints),
            "total_input_tokens": prompt.total_tokens,
            "read_from": None if read_from is None else read_from.where,
            "breakpoints": [
                {
                    "where": bp.where,
                    "ttl": bp.ttl,
                    "prefix_tokens": bp.cumulative,
                    "hit": hits[bp.where].where if bp.where in hits else None,
                    "written": bp in written,
                    "below_minimum": minimum is None or bp.cumulative < minimum,
                    # An entry was written here but its TTL passed: a miss the API's
                    # diagnostics do not name (they compare request structure only).
                    "expired": bp.where not in hits and self._expired(bp.key, now),
                    "near_minimum": near(bp.cumulative),
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

    def _expired(self, key: str, now: float) -> bool:
        with self._lock:
            entry = self._entries.get(key)
            return entry is not None and entry.expires_at <= now

    def _purge(self, now: float) -> None:
        # Entries long past their expiry can never be read or refreshed again.
        if len(self._entries) < 4096:
            return
        for key in [k for k, e in self._entries.items() if e.expires_at + 3600 < now]:
            del self._entries[key]
