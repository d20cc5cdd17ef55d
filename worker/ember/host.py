"""What an agent runtime (the host) needs from Ember: prefix capture, the host API, the shadow tool.

Capture: the hot path replays the host's last request byte for byte, so the host must record the
exact bytes its `anthropic` client sent and the raw answer, with the moment the request started
(the cache lifetime runs from there). `PrefixCapture` does this with event hooks on the SDK's
HTTP client, so the host keeps calling `client.messages.create` as before.

The history breakpoint: the replay reads the old prefix from the prompt cache only as far as the
host's own request wrote it, and a request writes the cache only at its breakpoints. So, as the
seed's Anthropic adapter does, `PrefixCapture` puts one `cache_control` marker on the last message
of each request it sends, unless the request has one there already (or four in all, or a
top-level automatic one); markers are not part of the cache key and no other byte changes
(`ember.cachemark`). `PrefixCapture(mark_history=False)` sends requests exactly as the client
built them.

Memory tools: `MemoryTools` gives the host's agent `search_memory` and `explain_fact` (tool
definitions whose input schemas come from pydantic models, and a handler that runs each call as
the calling thread, so a thread finds only the facts its model may read).

The shadow tool: every turn of every thread offers `shadow_memory_propose` from the first turn on
(adding it later would change the tools and miss the whole cache), and a symmetric policy keeps
each kind of turn to its own tools.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import psycopg

from ember import control, memory, queries
from ember.cachemark import mark_history as _mark_history
from ember.tenants import DEFAULT_TENANT
from ember.tools import SHADOW_TOOL_NAME, shadow_tool_definition

# --- capture ---


@dataclass(frozen=True)
class Captured:
    """One model call as it went over the wire."""

    request: str  # the request body exactly as sent
    response: str  # the answer as a Messages API JSON object (assembled when streamed)
    started_at: datetime  # when the request started


def _is_messages_call(request: httpx2.Request) -> bool:
    return request.method == "POST" and request.url.path.rstrip("/").endswith("/v1/messages")


def assemble_stream(events_text: str) -> dict[str, Any]:
    """The final message of a streamed answer, built from its server-sent events.

    Content blocks keep their fields as the stream gave them (thinking with its signature,
    redacted thinking with its data, tool_use with its input parsed from the JSON deltas).
    """
    message: dict[str, Any] = {}
    partial_json: dict[int, str] = {}
    for chunk in events_text.split("\n\n"):
        data = "".join(line[5:].lstrip() for line in chunk.splitlines() if line.startswith("data:"))
        if not data:
            continue
        event = json.loads(data)
        kind = event.get("type")
        if kind == "message_start":
            message = dict(event["message"])
            message["content"] = []
        elif kind == "content_block_start":
            message["content"].append(dict(event["content_block"]))
        elif kind == "content_block_delta":
            index, delta = event["index"], event["delta"]
            block = message["content"][index]
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif dtype == "signature_delta":
                block["signature"] = block.get("signature", "") + delta["signature"]
            elif dtype == "input_json_delta":
                partial_json[index] = partial_json.get(index, "") + delta["partial_json"]
        elif kind == "content_block_stop":
            index = event["index"]
            if index in partial_json:
                text = partial_json.pop(index)
                message["content"][index]["input"] = json.loads(text) if text else {}
        elif kind == "message_delta":
            message.update(event.get("delta") or {})
            usage = dict(message.get("usage") or {})
            usage.update(event.get("usage") or {})
            message["usage"] = usage
    return message


class PrefixCapture:
    """Records the last successful Messages API call of the client it is attached to.

    >>> capture = PrefixCapture()
    >>> client = anthropic.Anthropic(http_client=capture.http_client())
    >>> client.messages.create(...)
    >>> host.note_prefix("t1", capture.take())

    Only successful (2xx) answers are kept: a failed call is not a prefix anyone could replay.
    Each request gets the history breakpoint on its last message unless `mark_history` is False
    (see the module's docstring); what is recorded is what was sent.
    """

    def __init__(self, *, mark_history: bool = True) -> None:
        self._lock = threading.Lock()
        self._started: dict[int, tuple[datetime, bytes]] = {}
        self._last: Captured | None = None
        self.mark_history = mark_history

    def _on_request(self, request: httpx2.Request) -> None:
        if _is_messages_call(request):
            body = request.content
            marked = _mark_history(body) if self.mark_history else None
            if marked is not None:
                # The hook runs before the transport reads the body: the stream is what is sent.
                # `_content` is what `request.content` reports afterwards; httpx2 has no public
                # setter for it, and a stale one would misreport the bytes that went out.
                request.stream = httpx2.ByteStream(marked)
                request._content = marked
                request.headers["Content-Length"] = str(len(marked))
                body = marked
            with self._lock:
                self._started[id(request)] = (datetime.now(UTC), body)

    def _record(self, response: httpx2.Response) -> None:
        with self._lock:
            start = self._started.pop(id(response.request), None)
        if start is None or not response.is_success:
            return
        text = response.content.decode("utf-8")
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            text = json.dumps(assemble_stream(text), ensure_ascii=False, separators=(",", ":"))
        captured = Captured(start[1].decode("utf-8"), text, start[0])
        with self._lock:
            self._last = captured

    def _on_response(self, response: httpx2.Response) -> None:
        if _is_messages_call(response.request):
            response.read()
            self._record(response)

    async def _on_request_async(self, request: httpx2.Request) -> None:
        self._on_request(request)

    async def _on_response_async(self, response: httpx2.Response) -> None:
        if _is_messages_call(response.request):
            await response.aread()
            self._record(response)

    def http_client(self, **kwargs: Any) -> httpx2.Client:
        """An HTTP client for `anthropic.Anthropic(http_client=...)` that captures each call."""
        import anthropic

        return anthropic.DefaultHttpxClient(
            event_hooks={"request": [self._on_request], "response": [self._on_response]},
            **kwargs,
        )

    def async_http_client(self, **kwargs: Any) -> httpx2.AsyncClient:
        """The same for `anthropic.AsyncAnthropic(http_client=...)`."""
        import anthropic

        return anthropic.DefaultAsyncHttpxClient(
            event_hooks={
                "request": [self._on_request_async],
                "response": [self._on_response_async],
            },
            **kwargs,
        )

    @property
    def last(self) -> Captured | None:
        return self._last

    def take(self) -> Captured:
        """The last captured call, cleared so that it is noted once."""
        with self._lock:
            captured, self._last = self._last, None
        if captured is None:
            raise LookupError("no successful Messages API call was captured")
        return captured


# --- the shadow tool and the symmetric tool policy ---


def shadow_tool() -> dict[str, Any]:
    """The `shadow_memory_propose` definition to include in every turn's tools."""
    return shadow_tool_definition()


def turn_tools(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The host's tools with the shadow tool last: the same list for every turn of every thread."""
    return [t for t in tools if t.get("name") != SHADOW_TOOL_NAME] + [shadow_tool()]


def tool_call_refusal(tool_name: str, *, shadow_turn: bool) -> str | None:
    """Why a tool call may not run in this kind of turn, or None when it may.

    A normal turn may not call the shadow tool (it is offered only so the tools never change);
    a shadow turn may call nothing else (it must not act in the world).
    """
    if shadow_turn and tool_name != SHADOW_TOOL_NAME:
        return f"a shadow turn may call only {SHADOW_TOOL_NAME}; {tool_name} did not run"
    if not shadow_turn and tool_name == SHADOW_TOOL_NAME:
        return f"{SHADOW_TOOL_NAME} is used only by the memory system; it did not run"
    return None


def unavailable_at_turn_start(tool_names: Iterable[str]) -> list[str]:
    """The "tools unavailable at turn start" list to tell the model: never the shadow tool."""
    return [name for name in tool_names if name != SHADOW_TOOL_NAME]


# --- memory tools for the host's own agent loop ---

MEMORY_TOOL_NAMES = ("search_memory", "explain_fact")


def memory_tool_definitions() -> list[dict[str, Any]]:
    """`search_memory` and `explain_fact` as Messages API tool definitions."""
    return [
        {
            "name": name,
            "description": memory.tool_description(name),
            "input_schema": memory.input_schema(name),
        }
        for name in MEMORY_TOOL_NAMES
    ]


class MemoryTools:
    """The memory tools of one thread: each call reads as that thread (its labels apply).

    >>> tools = MemoryTools(conn, "trip")
    >>> client.messages.create(..., tools=[*my_tools, *tools.definitions()])
    >>> results = [tools.handle(block) for block in reply.content if tools.handles(block)]

    A result is a `tool_result` block whose text opens with what it is (facts with ids, data
    not instructions) and quotes every fact text, so nothing a fact says can pass for another
    result, an id or an instruction. Bad input and refusals come back as `is_error` results with
    the reason, for the model to correct; a broken connection raises.
    """

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        thread_id: str,
        *,
        tenant: str = DEFAULT_TENANT,
        embed: Any = None,
    ) -> None:
        self._memory = memory.Memory(conn, thread_id, tenant=tenant, embed=embed)

    def definitions(self) -> list[dict[str, Any]]:
        return memory_tool_definitions()

    def handles(self, block: Any) -> bool:
        return _field(block, "type") == "tool_use" and _field(block, "name") in MEMORY_TOOL_NAMES

    def handle(self, block: Any) -> dict[str, Any]:
        """The tool_result block answering one tool_use block (a dict or an SDK object)."""
        name = str(_field(block, "name"))
        try:
            if name not in MEMORY_TOOL_NAMES:
                raise memory.ToolInputError(f'"{name}" is not a memory tool')
            content, is_error = self._memory.call(name, _field(block, "input")), False
        except (memory.ToolInputError, memory.MemoryRefused) as exc:
            content, is_error = f"{name} refused: {exc}", True
        return {
            "type": "tool_result",
            "tool_use_id": _field(block, "id"),
            "content": content,
            "is_error": is_error,
        }


def _field(block: Any, key: str) -> Any:
    return block.get(key) if isinstance(block, dict) else getattr(block, key, None)


# --- the host API (thin typed wrappers over the SQL functions) ---


@dataclass(frozen=True)
class SetupStep:
    """One step of `Host.setup`: what it concerns, whether it changed anything, and what it did."""

    step: str  # category, main, steward, shadow
    changed: bool
    detail: str

    def __str__(self) -> str:
        return f"{'done' if self.changed else 'ok  '}  {self.detail}"


class Host:
    """The host API on one psycopg connection; each call is one statement of the SQL API.

    `tenant` is the person whose threads these are (docs/tenants.md): bound once here, it is the
    first argument of every call, so a host cannot write into another person's threads by
    naming a thread id they share. `default` is the tenant a single-person database holds.

    `clock`, when given, is a callable returning the time (a timezone-aware datetime): every call
    whose SQL function takes the time (`p_now`) is made at that time, as a host that simulates
    time (a replay, the demo) does. Without one, each call takes the database's own clock, as
    the functions do by default.
    """

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        *,
        tenant: str = DEFAULT_TENANT,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.conn = conn
        self.tenant = tenant
        self.clock = clock

    def _now(self) -> datetime | None:
        """The time of the call about to be made: the clock's, or None for the database's."""
        return None if self.clock is None else self.clock()

    def _one(self, query: Any, params: Mapping[str, Any]) -> Any:
        """One statement's one value; every call names this host's tenant (`%(tenant)s`)."""
        row = self.conn.execute(query, {"tenant": self.tenant, **params}).fetchone()
        return row[0] if row else None

    def setup(
        self,
        categories: Mapping[str, str | None] | Iterable[str] = (),
        *,
        main: str | None = None,
        main_model: str | None = None,
        activate_shadow: bool = True,
    ) -> list[SetupStep]:
        """The one-time calls, idempotently, in the order that matters (`ember.setup`).

        Creates the tenant when it is new, defines the content categories (a mapping of name
        to description, or names), creates
        the main thread `main` pinned to `main_model` when there is no main yet, creates the
        steward's hidden thread (it copies main's model pin once, so main comes first), and
        activates shadow memory. Returns what each step did; calling it again changes nothing.
        """
        wanted: dict[str, str | None] = (
            dict(categories) if isinstance(categories, Mapping) else dict.fromkeys(categories)
        )
        rows = self.conn.execute(
            queries.HOST_SETUP,
            {
                "tenant": self.tenant,
                "categories": json.dumps(wanted),
                "main": main,
                "main_model": main_model,
                "activate_shadow": activate_shadow,
                "now": self._now(),
            },
        ).fetchall()
        return [SetupStep(str(step), bool(changed), str(detail)) for step, changed, detail in rows]

    def define_category(self, name: str, description: str | None = None) -> str:
        """One content category (one step of `setup`); a NULL description keeps the old one."""
        return str(
            self._one(queries.HOST_DEFINE_CATEGORY, {"name": name, "description": description})
        )

    def ensure_steward_thread(self) -> str:
        """The steward's hidden thread, once main exists (one step of `setup`)."""
        return str(self._one(queries.HOST_ENSURE_STEWARD, {"now": self._now()}))

    def activate_shadow(self) -> Any:
        """Shadow memory on, from this moment (one step of `setup`); what activation did."""
        return self._one(queries.HOST_ACTIVATE_SHADOW, {"now": self._now()})

    def call_model(self, thread_id: str) -> str | None:
        """The model the thread's next call may go to: its pin, refused (EM022, category_model)
        when the thread carries labels the pin is not tagged for. None: unpinned and
        unlabelled, the host's own choice."""
        answer = self._one(queries.HOST_CALL_MODEL, {"thread": thread_id})
        model = (answer or {}).get("model")
        return None if model is None else str(model)

    def create_thread(
        self,
        thread_id: str,
        kind: str,
        *,
        title: str | None = None,
        category: str | None = None,
        seal_tier: str = "open",
        model: str | None = None,
    ) -> str:
        return str(
            self._one(
                queries.HOST_CREATE_THREAD,
                {
                    "thread": thread_id,
                    "kind": kind,
                    "title": title,
                    "category": category,
                    "seal_tier": seal_tier,
                    "model": model,
                    "now": self._now(),
                },
            )
        )

    def start_generation(self, thread_id: str) -> str:
        return str(
            self._one(queries.HOST_START_GENERATION, {"thread": thread_id, "now": self._now()})
        )

    def append_message(
        self,
        thread_id: str,
        role: str,
        content: str,
        *,
        author: str | None = None,
        blocks: Any = None,
        blocks_json: str | None = None,
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        tool_status: str | None = None,
        from_thread: str | None = None,
    ) -> int:
        """One message; `blocks` is dumped as JSON, `blocks_json` (instead) is stored as given."""
        raw_blocks = blocks_json
        if raw_blocks is None and blocks is not None:
            raw_blocks = json.dumps(blocks, ensure_ascii=False)
        return int(
            self._one(
                queries.HOST_APPEND_MESSAGE,
                {
                    "thread": thread_id,
                    "role": role,
                    "content": content,
                    "author": author,
                    "blocks": raw_blocks,
                    "tool_call_id": tool_call_id,
                    "tool_name": tool_name,
                    "tool_status": tool_status,
                    "from_thread": from_thread,
                    "now": self._now(),
                },
            )
        )

    def note_prefix(self, thread_id: str, captured: Captured) -> bool:
        return bool(
            self._one(
                queries.HOST_NOTE_PREFIX,
                {
                    "thread": thread_id,
                    "request": captured.request,
                    "response": captured.response,
                    "started_at": captured.started_at,
                    "now": self._now(),
                },
            )
        )

    def turn_started(self, thread_id: str) -> None:
        self._one(queries.HOST_TURN_STARTED, {"thread": thread_id, "now": self._now()})

    def turn_ended(self, thread_id: str, ok: bool = True) -> str:
        return str(
            self._one(queries.HOST_TURN_ENDED, {"thread": thread_id, "ok": ok, "now": self._now()})
        )

    def waiting_for_user(self, thread_id: str) -> str:
        return str(
            self._one(queries.HOST_WAITING_FOR_USER, {"thread": thread_id, "now": self._now()})
        )

    def task_ended(self, thread_id: str) -> str:
        return str(self._one(queries.HOST_TASK_ENDED, {"thread": thread_id, "now": self._now()}))

    def set_thread_status(self, thread_id: str, status: str) -> None:
        self._one(
            queries.HOST_SET_THREAD_STATUS,
            {"thread": thread_id, "status": status, "now": self._now()},
        )

    def seal_thread(self, thread_id: str) -> bool:
        """Isolate a side or task thread from now on; False when it already was."""
        return bool(self._one(queries.HOST_SEAL_THREAD, {"thread": thread_id}))

    # --- main's control plane (the typed functions live in ember.control) ---

    def identity_for_turn(self, thread_id: str, root: Path) -> control.Identity:
        """Read the thread's identity documents under `root` and record them for its next turn."""
        return control.identity_for_turn(self.conn, thread_id, root, now=self._now())

    def thread_tools(self, thread_id: str) -> list[control.ThreadTool]:
        return control.thread_tools(self.conn, thread_id)

    def side_chat_message(
        self, tool_call_id: str, thread_id: str, intent: control.Intent, message: str
    ) -> str:
        return control.side_chat_message(
            self.conn, tool_call_id, thread_id, intent, message, now=self._now()
        )

    def side_chat_inspect(self, thread_id: str) -> control.Scene:
        return control.side_chat_inspect(self.conn, thread_id)

    def report_progress(self, tool_call_id: str, thread_id: str, report: str) -> str:
        return control.report_progress(self.conn, tool_call_id, thread_id, report, now=self._now())

    def deliverable_events(self, thread_id: str, *, at_safe_point: bool) -> list[control.Event]:
        return control.deliverable_events(
            self.conn, thread_id, at_safe_point=at_safe_point, now=self._now()
        )

    def progress_board(self) -> list[control.BoardRow]:
        return control.progress_board(self.conn)
