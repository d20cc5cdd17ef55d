"""Request validation: the refusals Anthropic answers with a 4xx before any work.

Structural checks come first (types and required fields), then the rules the
cache accounting depends on: at most 4 breakpoints, no marker on thinking or
empty text, 1h markers before 5m markers, every ``tool_use`` answered first thing
in the next user message, no forced tool with thinking, a known model.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..media import MediaError, document_block_tokens, image_block_tokens
from .errors import ApiError, invalid
from .models import ModelInfo, ModelTable

MAX_BREAKPOINTS = 4
TTLS = ("5m", "1h")
TOOL_CHOICES = ("auto", "any", "tool", "none")
THINKING_TYPES = ("enabled", "disabled", "adaptive", "between_tools")
EFFORTS = ("low", "medium", "high", "xhigh", "max")
SPEEDS = ("standard", "fast")

# Top-level fields the simulator reads, or knows leave the prompt alone (sampling and
# bookkeeping). Anything else is refused rather than ignored: an ignored field that
# changes what the model sees would show a cache hit the API never gives.
KNOWN_FIELDS = frozenset(
    {
        "model", "max_tokens", "messages", "system", "tools", "tool_choice", "thinking",
        "stream", "cache_control", "output_config", "speed", "workspace_id",
        "temperature", "top_p", "top_k", "stop_sequences", "metadata", "service_tier",
        "diagnostics",
    }
)  # fmt: skip
# Fields that change the prompt in ways the simulator does not reproduce: refused by name.
UNMODELLED_FIELDS = {
    "context_management": "context editing clears tool results and thinking from the prompt",
    "mcp_servers": "the MCP connector adds the servers' tool definitions to the prompt",
    "container": "skills and code-execution containers add to the prompt",
    "output_format": "the older structured-outputs field; use output_config.format",
}


def not_modelled(what: str, why: str) -> ApiError:
    """A refusal for a request the API would take but the simulator cannot account for."""
    return invalid(
        f"{what}: not modelled by ember sim ({why}); it would change the prompt cache in "
        "ways the simulator cannot reproduce, so it is refused rather than ignored"
    )


def validate_request(body: Any, models: ModelTable, *, count_tokens: bool = False) -> ModelInfo:
    """The model the request names, or an ApiError saying what is wrong."""
    if not isinstance(body, dict):
        raise invalid("request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid("model: Field required")
    _check_fields(body, count_tokens)
    if not count_tokens:
        max_tokens = body.get("max_tokens")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise invalid("max_tokens: Field required (an integer)")
        # 0 is allowed: a pre-warming request writes the cache and generates nothing.
        if max_tokens < 0:
            raise invalid("max_tokens: must be at least 0")
        if "stream" in body and not isinstance(body["stream"], bool):
            raise invalid("stream: must be a boolean")
    _check_messages(body.get("messages"))
    _check_system(body.get("system"))
    _check_tools(body.get("tools"))
    _check_tool_choice(body.get("tool_choice"))
    _check_thinking(body.get("thinking"), None if count_tokens else body.get("max_tokens"))
    _check_markers(body)
    _check_tool_pairs(body["messages"])
    _check_forced_tool_with_thinking(body)
    _check_output_config(body.get("output_config"))
    _check_speed(body.get("speed"))
    info = models.lookup(model)
    if info is None:
        raise ApiError(404, f"model: {model}")
    _check_thinking_mode(body.get("thinking"), info)
    return info


def _check_fields(body: dict[str, Any], count_tokens: bool) -> None:
    for name in body:
        if name in UNMODELLED_FIELDS:
            raise not_modelled(name, UNMODELLED_FIELDS[name])
        if name not in KNOWN_FIELDS:
            raise not_modelled(name, "an unknown field, which may change what the model sees")


def _check_output_config(config: Any) -> None:
    if config is None:
        return
    if not isinstance(config, dict):
        raise invalid("output_config: must be an object")
    for key in config:
        if key not in ("effort", "format"):
            raise not_modelled(f"output_config.{key}", "an output setting it does not know")
    effort = config.get("effort")
    if effort is not None and effort not in EFFORTS:
        raise invalid("output_config.effort: must be one of " + ", ".join(EFFORTS))
    fmt = config.get("format")
    if fmt is not None and (not isinstance(fmt, dict) or fmt.get("type") != "json_schema"):
        raise invalid("output_config.format.type: must be 'json_schema'")


def _check_speed(speed: Any) -> None:
    if speed is not None and speed not in SPEEDS:
        raise invalid("speed: must be one of " + ", ".join(SPEEDS))


def _check_thinking_mode(thinking: Any, info: ModelInfo) -> None:
    enabled = isinstance(thinking, dict) and thinking.get("type") == "enabled"
    if info.adaptive_thinking_only and enabled:
        raise invalid(
            '"thinking.type.enabled" is not supported for this model. Use '
            '"thinking.type.adaptive" and "output_config.effort" to control thinking '
            "behavior."
        )


def thinking_enabled(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type", "disabled") != "disabled"


def _check_messages(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise invalid("messages: Field required (a non-empty list)")
    last = len(messages) - 1
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise invalid(f"messages.{i}: must be an object")
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise invalid(f"messages.{i}.role: must be 'user' or 'assistant'")
        content = message.get("content")
        if isinstance(content, str):
            empty = content == ""
            if content and not content.strip() and not (i == last and role == "assistant"):
                raise invalid(
                    f"messages.{i}.content: text content blocks must contain non-whitespace text"
                )
        elif isinstance(content, list):
            for j, block in enumerate(content):
                _check_block(block, f"messages.{i}.content.{j}")
            empty = not content
        else:
            raise invalid(f"messages.{i}.content: must be a string or a list of content blocks")
        if empty and not (i == last and role == "assistant"):
            raise invalid(
                f"messages.{i}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
    _check_prefill(messages[last])


def _check_prefill(message: dict[str, Any]) -> None:
    """A final assistant message (a prefill) may be empty, but may not end in whitespace."""
    if message["role"] != "assistant":
        return
    content = message["content"]
    final = content if isinstance(content, str) else None
    if isinstance(content, list) and content and content[-1].get("type") == "text":
        final = content[-1]["text"]
    if final and final[-1].isspace():
        raise invalid("messages: final assistant content cannot end with trailing whitespace")


def _check_block(block: Any, where: str) -> None:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise invalid(f"{where}: a content block must be an object with a string 'type'")
    kind = block["type"]
    if kind == "text":
        _check_text_block(block, where)
    elif kind in ("image", "document"):
        try:
            (image_block_tokens if kind == "image" else document_block_tokens)(block, where)
        except MediaError as exc:
            raise invalid(str(exc)) from None
    elif kind == "tool_use":
        _check_tool_use_block(block, where)
    elif kind == "tool_result":
        _check_tool_result_block(block, where)
    elif kind == "thinking" and not isinstance(block.get("thinking"), str):
        raise invalid(f"{where}.thinking: Field required")


def _check_text_block(block: dict[str, Any], where: str) -> None:
    if not isinstance(block.get("text"), str):
        raise invalid(f"{where}.text: Field required")
    if not block["text"]:
        raise invalid(f"{where}.text: text content blocks must be non-empty")
    if not block["text"].strip():
        raise invalid(f"{where}.text: text content blocks must contain non-whitespace text")


def _check_tool_use_block(block: dict[str, Any], where: str) -> None:
    if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
        raise invalid(f"{where}: tool_use needs a string 'id' and 'name'")
    if not isinstance(block.get("input"), dict):
        raise invalid(f"{where}.input: must be an object")


def _check_tool_result_block(block: dict[str, Any], where: str) -> None:
    if not isinstance(block.get("tool_use_id"), str):
        raise invalid(f"{where}.tool_use_id: Field required")
    content = block.get("content")
    if isinstance(content, list):
        for k, part in enumerate(content):
            _check_block(part, f"{where}.content.{k}")
    elif content is not None and not isinstance(content, str):
        raise invalid(f"{where}.content: must be a string or a list of content blocks")


def _check_system(system: Any) -> None:
    if isinstance(system, str) and system and not system.strip():
        raise invalid("system: text content blocks must contain non-whitespace text")
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise invalid("system: must be a string or a list of text blocks")
    for j, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise invalid(f"system.{j}: system blocks must be text blocks")
        _check_block(block, f"system.{j}")


def _check_tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise invalid("tools: must be a list")
    seen: set[str] = set()
    for j, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise invalid(f"tools.{j}: a tool must be an object with a string 'name'")
        custom = tool.get("type", "custom") == "custom"
        if custom and not isinstance(tool.get("input_schema"), dict):
            raise invalid(f"tools.{j}.input_schema: Field required")
        if tool["name"] in seen:
            raise invalid(f"tools: tool names must be unique ({tool['name']!r} repeats)")
        seen.add(tool["name"])


def _check_tool_choice(choice: Any) -> None:
    if choice is None:
        return
    if not isinstance(choice, dict) or choice.get("type") not in TOOL_CHOICES:
        raise invalid("tool_choice.type: must be one of auto, any, tool, none")
    if choice["type"] == "tool" and not isinstance(choice.get("name"), str):
        raise invalid("tool_choice.name: Field required")


def _check_thinking(thinking: Any, max_tokens: Any) -> None:
    if thinking is None:
        return
    if not isinstance(thinking, dict) or thinking.get("type") not in THINKING_TYPES:
        raise invalid("thinking.type: must be one of " + ", ".join(THINKING_TYPES))
    if thinking["type"] == "adaptive" and "budget_tokens" in thinking:
        raise invalid("thinking.adaptive.budget_tokens: Extra inputs are not permitted")
    if thinking["type"] != "enabled":
        return
    budget = thinking.get("budget_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1024:
        raise invalid("thinking.enabled.budget_tokens: must be an integer >= 1024")
    if isinstance(max_tokens, int) and budget >= max_tokens:
        raise invalid("`max_tokens` must be greater than `thinking.budget_tokens`")


def _marked_blocks(body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every block that carries cache_control, in prompt order (tools, system, messages).

    ``"cache_control": null`` is no marker: the API types every marker as optional.
    """
    for j, tool in enumerate(body.get("tools") or []):
        if tool.get("cache_control") is not None:
            yield f"tools.{j}", tool
    system = body.get("system")
    if isinstance(system, list):
        for j, block in enumerate(system):
            if block.get("cache_control") is not None:
                yield f"system.{j}", block
    for i, message in enumerate(body["messages"]):
        content = message["content"]
        if not isinstance(content, list):
            continue
        for j, block in enumerate(content):
            if block.get("cache_control") is not None:
                yield f"messages.{i}.content.{j}", block
            nested = block.get("content") if block["type"] == "tool_result" else None
            if isinstance(nested, list):
                for k, part in enumerate(nested):
                    if part.get("cache_control") is not None:
                        yield f"messages.{i}.content.{j}.content.{k}", part


def marker_ttl(marker: Any, where: str) -> str:
    """The TTL of one cache_control value ('5m' by default), or a 400."""
    if not isinstance(marker, dict) or marker.get("type") != "ephemeral":
        raise invalid(f"{where}.cache_control.type: must be 'ephemeral'")
    ttl = marker.get("ttl", "5m")
    if ttl not in TTLS:
        raise invalid(f"{where}.cache_control.ttl: must be '5m' or '1h'")
    return str(ttl)


def _check_markers(body: dict[str, Any]) -> None:
    ttls: list[tuple[str, str]] = []
    for where, block in _marked_blocks(body):
        ttl = marker_ttl(block["cache_control"], where)
        if block.get("type") in ("thinking", "redacted_thinking"):
            raise invalid(f"{where}: cache_control cannot be set on {block['type']} blocks")
        if block.get("type") == "text" and block.get("text") == "":
            raise invalid(f"{where}.text: cache_control cannot be set for empty text blocks")
        ttls.append((where, ttl))
    # The automatic breakpoint counts against the limit and sits last in prompt order.
    if body.get("cache_control") is not None:
        ttls.append(("cache_control", marker_ttl(body["cache_control"], "(top level)")))
    if len(ttls) > MAX_BREAKPOINTS:
        raise invalid(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(ttls)}."
        )
    seen_5m = False
    for where, ttl in ttls:
        if ttl == "1h" and seen_5m:
            raise invalid(
                f"{where}: a ttl='1h' cache_control block must not come after a ttl='5m' "
                "cache_control block. Note that blocks are processed in the following "
                "order: `tools`, `system`, `messages`."
            )
        seen_5m = seen_5m or ttl == "5m"


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def _check_tool_pairs(messages: list[dict[str, Any]]) -> None:
    """Every tool_use is answered, results first, in the very next user message."""
    for i, message in enumerate(messages):
        blocks = _blocks(message)
        if message["role"] == "user":
            results = [b for b in blocks if b["type"] == "tool_result"]
            if not results:
                continue
            leading = 0
            while leading < len(blocks) and blocks[leading]["type"] == "tool_result":
                leading += 1
            if leading != len(results):
                raise invalid(
                    f"messages.{i}: `tool_result` blocks must come first in the user message, "
                    "before any other content"
                )
            previous = messages[i - 1] if i > 0 else None
            asked = (
                {b["id"] for b in _blocks(previous) if b["type"] == "tool_use"}
                if previous is not None and previous["role"] == "assistant"
                else set()
            )
            stray = [b["tool_use_id"] for b in results if b["tool_use_id"] not in asked]
            if stray:
                raise invalid(
                    f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` "
                    f"blocks: {', '.join(stray)}. Each `tool_result` block must have a "
                    "corresponding `tool_use` block in the previous message."
                )
            continue
        ids = [b["id"] for b in blocks if b["type"] == "tool_use"]
        if not ids:
            continue
        following = messages[i + 1] if i + 1 < len(messages) else None
        answered: set[str] = set()
        if following is not None and following["role"] == "user":
            # Results out of order are reported when that user message is checked.
            answered = {b["tool_use_id"] for b in _blocks(following) if b["type"] == "tool_result"}
        missing = [tool_id for tool_id in ids if tool_id not in answered]
        if missing:
            raise invalid(
                f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message."
            )


def _check_forced_tool_with_thinking(body: dict[str, Any]) -> None:
    choice = body.get("tool_choice")
    if thinking_enabled(body) and isinstance(choice, dict) and choice["type"] in ("any", "tool"):
        raise invalid(
            "Thinking may not be enabled when tool_choice forces tool use "
            f"(tool_choice.type={choice['type']!r}); use 'auto' or 'none'."
        )
