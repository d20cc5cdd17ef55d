"""Preserved thinking: thinking blocks bound to the model and the exact prefix that produced them.

As Anthropic documents it (build-with-claude/preserved-thinking and its prefix-checks page), on
a model with preserved thinking every ``thinking`` or ``redacted_thinking`` block sent back is
checked through its signature:

* the model check: the current model reads its own blocks and those of a fixed set of other
  models (``reads_thinking_from``); any other block is dropped from the request, without an
  error, and listed in the response's ``input_transformations`` (``model_binding_mismatch``);
* the prefix check: ``system``, ``tools`` and everything in ``messages`` before the block must
  be what was sent when the block was produced. A block that fails it (and so every later block
  produced before the change, whose prefix held the change too) fails the request with the
  documented 400, or, when the request sets ``thinking.block_binding.prefix_mismatch_behavior``
  to ``"drop_block"`` (with the ``thinking-binding-controls-2026-08-01`` beta), is dropped and
  listed (``prefix_binding_mismatch``). A block that carries no binding at all fails it too.

The simulator's signature is its own token (``embersim1.<payload>.<mac>``) naming the model and
a digest of the block's prefix. Cache markers are not part of the digest: they are not content,
and the hot path adds one on the old last message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..tokens import canonical_json, strip_cache_control
from .errors import invalid
from .models import ModelInfo

BINDING_BETA = "thinking-binding-controls-2026-08-01"
THINKING_KINDS = ("thinking", "redacted_thinking")
_PREFIX = "embersim1"
_KEY = b"ember-sim preserved thinking"  # not a secret: it only makes edits detectable


def _as_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content or [])


def prefix_digest(
    body: Mapping[str, Any], messages: list[Any], before: list[Any] | None = None
) -> str:
    """The digest of a block's prefix: system, tools, the messages before its own, and the
    blocks before it in its own message (``before``)."""
    h = hashlib.sha256()
    for part in (
        [strip_cache_control(t) for t in body.get("tools") or []],
        [strip_cache_control(b) for b in _as_blocks(body.get("system"))],
    ):
        h.update(canonical_json(part).encode("utf-8", "surrogatepass") + b"\x00")
    for message in messages:
        blocks = [strip_cache_control(b) for b in _as_blocks(message.get("content"))]
        h.update(canonical_json([message.get("role"), blocks]).encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    h.update(b"\x01")
    for block in before or []:
        h.update(canonical_json(strip_cache_control(block)).encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()[:32]


def sign(model: str, digest: str) -> str:
    payload = base64.urlsafe_b64encode(json.dumps({"m": model, "p": digest}).encode()).decode()
    mac = hmac.new(_KEY, payload.encode(), hashlib.sha256).hexdigest()[:16]
    return f"{_PREFIX}.{payload}.{mac}"


@dataclass(frozen=True)
class Binding:
    model: str
    digest: str


def read_binding(token: Any) -> Binding | None:
    """The binding a signature carries, or None for one the simulator did not issue (or edited)."""
    if not isinstance(token, str) or not token.startswith(_PREFIX + "."):
        return None
    try:
        _, payload, mac = token.split(".")
    except ValueError:
        return None
    good = hmac.new(_KEY, payload.encode(), hashlib.sha256).hexdigest()[:16]
    if not hmac.compare_digest(mac, good):
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(payload.encode()))
        return Binding(str(data["m"]), str(data["p"]))
    except (ValueError, KeyError, TypeError):
        return None


def _token(block: Mapping[str, Any]) -> Any:
    return block.get("signature") if block.get("type") == "thinking" else block.get("data")


def sign_reply(body: Mapping[str, Any], info: ModelInfo, content: list[dict[str, Any]]) -> None:
    """Bind each thinking block of a reply to this model and to its prefix, in place."""
    messages = list(body.get("messages") or [])
    for k, block in enumerate(content):
        if block.get("type") == "thinking":
            block["signature"] = sign(info.name, prefix_digest(body, messages, content[:k]))
        elif block.get("type") == "redacted_thinking":
            block["data"] = sign(info.name, prefix_digest(body, messages, content[:k]))


def _behavior(body: Mapping[str, Any], betas: Iterable[str]) -> str:
    thinking = body.get("thinking")
    binding = thinking.get("block_binding") if isinstance(thinking, dict) else None
    if binding is None:
        return "error"
    if BINDING_BETA not in set(betas):
        raise invalid(f"thinking.block_binding: requires the anthropic-beta header {BINDING_BETA}")
    if not isinstance(binding, dict):
        raise invalid("thinking.block_binding: Input should be an object")
    behavior = binding.get("prefix_mismatch_behavior") or "error"
    if behavior not in ("error", "drop_block"):
        raise invalid(
            "thinking.block_binding.prefix_mismatch_behavior: must be one of error, drop_block"
        )
    return str(behavior)


def check_bindings(
    body: dict[str, Any], info: ModelInfo, betas: Iterable[str]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The request as the model sees it (blocks that failed a binding check removed), and the
    ``input_transformations`` that list them; the documented 400 for a prefix mismatch unless
    the request opts into dropping."""
    behavior = _behavior(body, betas)
    if not info.preserved_thinking:
        return body, []
    readable = {info.name, *info.reads_thinking_from}
    messages = body.get("messages") or []
    dropped: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        blocks = _as_blocks(message.get("content"))
        for j, block in enumerate(blocks):
            if not isinstance(block, dict) or block.get("type") not in THINKING_KINDS:
                continue
            path = f"messages.{i}.content.{j}"
            binding = read_binding(_token(block))
            if binding is not None and binding.model not in readable:
                dropped.append({"type": "thinking_dropped", "path": path,
                                "reason": "model_binding_mismatch"})  # fmt: skip
                continue
            if binding is not None and binding.digest == prefix_digest(
                body, messages[:i], blocks[:j]
            ):
                continue
            if behavior != "drop_block":
                kind = block.get("type")
                raise invalid(
                    f"{path}: Invalid `signature` in `{kind}` block. The block is bound to a "
                    "different conversation. Remove the block, or set "
                    '`thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
                )
            dropped.append({"type": "thinking_dropped", "path": path,
                            "reason": "prefix_binding_mismatch"})  # fmt: skip
    if not dropped:
        return body, []
    gone = {d["path"] for d in dropped}
    seen = dict(body)
    seen["messages"] = [
        {**m, "content": [b for j, b in enumerate(_as_blocks(m.get("content")))
                          if f"messages.{i}.content.{j}" not in gone]}
        if isinstance(m, dict) and m.get("role") == "assistant" else m
        for i, m in enumerate(messages)
    ]  # fmt: skip
    return seen, dropped
