"""Cache diagnostics, as Anthropic documents them (build-with-claude/cache-diagnostics).

A request that carries a ``diagnostics`` object has its fingerprint stored under its response's
id; a later request naming that id in ``diagnostics.previous_message_id`` is compared with it,
and the response's ``diagnostics.cache_miss_reason`` names the first divergence: the model (or
``speed``), ``system``, ``tools``, an earlier entry of ``messages`` (not only entries appended),
``previous_message_not_found`` for an id with no stored fingerprint, or ``unavailable`` when
model, system and tools match but another prompt-affecting setting (thinking, tool_choice)
differs. ``diagnostics`` is null when no divergence was found. The comparison is of request
structure, whether or not the cache was read; what the API does not report (a TTL that passed,
a prefix below the minimum) the simulator says in its request log only.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..tokens import block_tokens, canonical_json, strip_cache_control
from .errors import invalid

KEEP = 10_000  # fingerprints kept, oldest dropped first (the API keeps them a limited time)


def _h(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8", "surrogatepass")).hexdigest()


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [strip_cache_control(b) for b in content or []]


@dataclass(frozen=True)
class Fingerprint:
    model: str
    tools: str
    system: str
    settings: str
    messages: tuple[str, ...]
    tool_tokens: int
    system_tokens: int
    message_tokens: tuple[int, ...]

    def tokens_from(self, section: str, index: int = 0) -> int:
        """Estimated tokens of this prompt from a section on (what a match would have read)."""
        rest = sum(self.message_tokens[index:])
        if section == "messages":
            return rest
        if section == "system":
            return self.system_tokens + sum(self.message_tokens)
        return self.tool_tokens + self.system_tokens + sum(self.message_tokens)


def fingerprint(body: Mapping[str, Any]) -> Fingerprint:
    tools = [strip_cache_control(t) for t in body.get("tools") or []]
    system = _blocks(body.get("system"))
    thinking = body.get("thinking")
    if isinstance(thinking, dict):  # binding controls do not change what the model sees
        thinking = {k: v for k, v in thinking.items() if k != "block_binding"}
    settings = {"thinking": thinking, "tool_choice": body.get("tool_choice"),
                "output_config": body.get("output_config")}  # fmt: skip
    messages = [(m.get("role"), _blocks(m.get("content"))) for m in body.get("messages") or []]
    return Fingerprint(
        model=f"{body.get('model')}|{body.get('speed') or 'standard'}",
        tools=_h(tools),
        system=_h(system),
        settings=_h(settings),
        messages=tuple(_h(m) for m in messages),
        tool_tokens=sum(block_tokens(t) for t in tools),
        system_tokens=sum(block_tokens(b) for b in system),
        message_tokens=tuple(sum(block_tokens(b) for b in blocks) for _, blocks in messages),
    )


def compare(old: Fingerprint, new: Fingerprint) -> dict[str, Any] | None:
    """The documented cache_miss_reason for ``new`` against ``old``, or None when it only
    appends to it."""
    if old.model != new.model:
        return {"type": "model_changed", "cache_missed_input_tokens": old.tokens_from("tools")}
    if old.tools != new.tools:
        return {"type": "tools_changed", "cache_missed_input_tokens": old.tokens_from("tools")}
    if old.system != new.system:
        return {"type": "system_changed", "cache_missed_input_tokens": old.tokens_from("system")}
    for i, digest in enumerate(old.messages):
        # The previous request's last entry may be completed by the new one (its answer follows).
        if i >= len(new.messages) or new.messages[i] != digest:
            return {"type": "messages_changed",
                    "cache_missed_input_tokens": old.tokens_from("messages", i)}  # fmt: skip
    if old.settings != new.settings:
        return {"type": "unavailable"}
    return None


class DiagnosticsStore:
    def __init__(self) -> None:
        self._prints: OrderedDict[str, Fingerprint] = OrderedDict()
        self._lock = threading.Lock()

    def requested(self, body: Mapping[str, Any]) -> bool:
        value = body.get("diagnostics")
        if value is None:
            return False
        if not isinstance(value, dict) or set(value) - {"previous_message_id"}:
            raise invalid("diagnostics: only previous_message_id may be set")
        previous = value.get("previous_message_id")
        if previous is not None and not isinstance(previous, str):
            raise invalid("diagnostics.previous_message_id: must be a string or null")
        return True

    def diagnose(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """The response's diagnostics object for a request that asked for them."""
        previous = (body.get("diagnostics") or {}).get("previous_message_id")
        if previous is None:
            return None
        with self._lock:
            old = self._prints.get(previous)
        if old is None:
            return {"cache_miss_reason": {"type": "previous_message_not_found"}}
        reason = compare(old, fingerprint(body))
        return None if reason is None else {"cache_miss_reason": reason}

    def store(self, message_id: str, body: Mapping[str, Any]) -> None:
        with self._lock:
            self._prints[message_id] = fingerprint(body)
            while len(self._prints) > KEEP:
                self._prints.popitem(last=False)
