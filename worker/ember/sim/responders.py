"""What the simulator answers: responders turn a validated request into an outcome.

Cache accounting does not depend on the responder; it is decided before the
responder runs. An outcome is one of:

- ``Reply``: an assistant message (content blocks and a stop reason);
- ``Fault``: an Anthropic-shaped error (429 with retry-after, 529, 500, ...),
  before the response starts or, when streaming, after ``message_start``;
- ``Truncated``: a 200 whose body stops halfway and the connection drops;
- ``Hang``: no answer until the client disconnects (or the server stops).

Responders by name (``--responder`` or the ``x-ember-sim-responder`` header):
``heuristic``, ``echo``, ``hang``, ``rate-limit[:SECONDS]``, ``overloaded``,
``server-error``, ``truncated``, ``malformed-tool-input`` and
``latency:SECONDS[:NAME]``. ``Scripted`` takes canned outcomes and is built in code.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio.to_thread

from .models import ModelInfo

SHADOW_TOOL = "shadow_memory_propose"


@dataclass(frozen=True)
class SimRequest:
    """A validated request as a responder sees it."""

    seq: int
    body: dict[str, Any]
    model: ModelInfo
    headers: Mapping[str, str]

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def tool_names(self) -> list[str]:
        return [t["name"] for t in self.body.get("tools") or []]

    def texts(self) -> Iterator[str]:
        """Every text the request carries: system, message text, tool result content."""
        system = self.body.get("system")
        if isinstance(system, str):
            yield system
        elif isinstance(system, list):
            yield from (b.get("text", "") for b in system)
        for message in self.body["messages"]:
            yield from _block_texts(message["content"])


def _block_texts(content: Any) -> Iterator[str]:
    if isinstance(content, str):
        yield content
        return
    for block in content or []:
        if block.get("type") == "text":
            yield block.get("text", "")
        elif block.get("type") == "tool_result":
            yield from _block_texts(block.get("content"))


def new_tool_use_id() -> str:
    return "toolu_" + uuid.uuid4().hex[:24]


@dataclass
class Reply:
    content: list[dict[str, Any]]
    stop_reason: str = "end_turn"
    output_tokens: int | None = None  # None: estimated from the content

    @classmethod
    def text(cls, text: str) -> Reply:
        return cls([{"type": "text", "text": text}])

    @classmethod
    def tool_use(cls, name: str, tool_input: dict[str, Any], text: str | None = None) -> Reply:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        blocks.append(
            {"type": "tool_use", "id": new_tool_use_id(), "name": name, "input": tool_input}
        )
        return cls(blocks, stop_reason="tool_use")


@dataclass
class Fault:
    status: int
    message: str
    error_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    mid_stream: bool = False  # streaming only: an `error` event after message_start

    @classmethod
    def rate_limited(cls, retry_after: float = 1.0) -> Fault:
        return cls(
            429,
            "Number of request tokens has exceeded your per-minute rate limit (simulated)",
            headers={"retry-after": _seconds(retry_after)},
        )

    @classmethod
    def overloaded(cls, mid_stream: bool = False) -> Fault:
        return cls(529, "Overloaded (simulated)", mid_stream=mid_stream)

    @classmethod
    def server_error(cls) -> Fault:
        return cls(500, "Internal server error (simulated)")


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


@dataclass
class Truncated:
    """A 200 whose body stops after ``fraction`` of it, then the connection drops."""

    reply: Reply | None = None  # None: the heuristic answer
    fraction: float = 0.5


@dataclass
class Hang:
    """Never answer; wait for the client to go away."""


Outcome = Reply | Fault | Truncated | Hang


class Responder(Protocol):
    name: str

    async def respond(self, request: SimRequest) -> Outcome: ...


# A scripted item: an outcome, a text, a raw message dict with "content", or a callable
# (sync or async) of the request returning one of those.
ScriptItem = Any


async def resolve_item(item: ScriptItem, request: SimRequest) -> Outcome:
    if callable(item) and not isinstance(item, type):
        if inspect.iscoroutinefunction(item):
            item = await item(request)
        else:
            # In a worker thread, so a callable may block (on a threading.Event, say)
            # without stalling the server's event loop.
            item = await anyio.to_thread.run_sync(item, request)
            if inspect.isawaitable(item):
                item = await item
    if isinstance(item, Reply | Fault | Truncated | Hang):
        return item
    if isinstance(item, str):
        return Reply.text(item)
    if isinstance(item, dict) and isinstance(item.get("content"), list):
        return Reply(item["content"], stop_reason=item.get("stop_reason", "end_turn"))
    raise TypeError(f"a scripted responder cannot answer with {type(item).__name__}")


class Scripted:
    """Answers with queued items in order; an empty queue is a 500 the test will notice."""

    name = "scripted"

    def __init__(self, items: Iterable[ScriptItem] = ()) -> None:
        self._items: deque[ScriptItem] = deque(items)
        self._lock = threading.Lock()

    def push(self, *items: ScriptItem) -> None:
        with self._lock:
            self._items.extend(items)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    async def respond(self, request: SimRequest) -> Outcome:
        with self._lock:
            item = self._items.popleft() if self._items else None
        if item is None:
            return Fault(500, "scripted responder: no response left in the queue")
        return await resolve_item(item, request)


@dataclass
class Fixed:
    """Always the same item (an outcome or a callable): the fault responders."""

    name: str
    item: ScriptItem

    async def respond(self, request: SimRequest) -> Outcome:
        return await resolve_item(self.item, request)


@dataclass
class Latency:
    """Waits (real time, not the cache clock) before the inner responder answers."""

    seconds: float
    inner: Responder
    name: str = "latency"

    async def respond(self, request: SimRequest) -> Outcome:
        await asyncio.sleep(self.seconds)
        return await self.inner.respond(request)


class Echo:
    """Repeats the last text of the request; handy to see the server answer at all."""

    name = "echo"

    async def respond(self, request: SimRequest) -> Outcome:
        texts = [t for t in request.texts() if t.strip()]
        return Reply.text(texts[-1][:2000] if texts else "(empty)")


# --- heuristic ---------------------------------------------------------------------

STATUS = re.compile(r"\[(?P<status>ok|error|pending)\]", re.IGNORECASE)
# Only this much of a line is parsed: a row's head is short, and the cues need a sentence,
# not a megabyte. Longer lines are cut, so no line costs more than a bounded scan.
MAX_LINE_CHARS = 4000


@dataclass
class Row:
    message_id: int
    role: str
    author: str | None
    tool_name: str | None
    status: str | None
    text: str


def _split_row(line: str) -> tuple[int, str, str] | None:
    """(id, head, text) of a line ``m:<id> <head>: <text>``, or None.

    Written as a scan rather than a regular expression: the pattern it replaces had
    three ambiguous whitespace runs and backtracked cubically on a line of spaces.
    The head holds no colon, so the first colon after the id ends it, and it must be
    followed by whitespace or the end of the line.
    """
    rest = line.lstrip()
    if not rest.startswith("m:"):
        return None
    digits = 2
    while digits < len(rest) and rest[digits].isascii() and rest[digits].isdigit():
        digits += 1
    if digits == 2 or digits == len(rest) or not rest[digits].isspace():
        return None
    colon = rest.find(":", digits)
    if colon < 0:
        return None
    text = rest[colon + 1 :]
    if text and not text[0].isspace():
        return None
    return int(rest[2:digits]), rest[digits:colon].strip(), text


def _split_head(head: str) -> tuple[str, str | None, str] | None:
    """(role, author, rest) of a head ``<role>[(<author>)] <rest>``, or None."""
    end = 0
    while end < len(head) and (head[end].isascii() and (head[end].isalpha() or head[end] == "_")):
        end += 1
    if end == 0:
        return None
    role, rest = head[:end], head[end:].lstrip()
    author: str | None = None
    if rest.startswith("("):
        close = rest.find(")")
        if close >= 0:
            author, rest = rest[1:close], rest[close + 1 :].lstrip()
    return role, author, rest


def parse_rows(text: str) -> list[Row]:
    """Rows rendered as ``m:<id> <role>[(<author>)] [<tool> [status]]: <content>``.

    Lines that do not start a row continue the previous row's content. Each line is
    parsed in time linear in its length, and only its first MAX_LINE_CHARS characters.
    """
    rows: list[Row] = []
    for whole in text.splitlines():
        line = whole[:MAX_LINE_CHARS]
        row = _split_row(line)
        head = _split_head(row[1]) if row else None
        if row is None or head is None:
            if rows:
                rows[-1].text += "\n" + line
            continue
        message_id, _, content = row
        role, author, rest = head
        status = STATUS.search(rest)
        tool = STATUS.sub("", rest).strip().split()
        rows.append(
            Row(
                message_id=message_id,
                role=role.lower(),
                author=(author or "").strip().lower() or None,
                tool_name=tool[0] if tool else None,
                status=status["status"].lower() if status else None,
                text=content.strip(),
            )
        )
    return rows


CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "preference",
        re.compile(
            r"\b(?:I|we)\s+(?:(?:really|much|strongly|always|usually|generally)\s+)?(?:prefer|like|love|hate|dislike|"
            r"enjoy|can't stand|don't like|do not like|don't want|do not want|want)\b"
            r"|\b(?:I'd|I would|we'd|we would)\s+(?:rather|prefer|like)\b"
            r"|\bmy\s+(?:favou?rite|preferred|usual)\b"
            r"|\b(?:I'm|I am)\s+(?:allergic|vegetarian|vegan|based in|located in)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "decision",
        re.compile(
            r"\b(?:I|we)\s+(?:have\s+|'ve\s+)?(?:decided|chose|chosen|picked|settled on)\b"
            r"|\b(?:I'll|I will|we'll|we will|let's|let us)\s+(?:go with|use|stick with|keep)\b"
            r"|\b(?:we're|we are|I'm|I am)\s+going with\b|\bthe decision is\b",
            re.IGNORECASE,
        ),
    ),
    (
        "instruction",
        re.compile(
            r"^(?:please\s+)?(?:always|never|don't ever|do not ever)\b"
            r"|\b(?:from now on|going forward|in future|in the future)\b"
            r"|\bremember\s+(?:that|to)\b|\bmake sure (?:to|you)\b"
            r"|\b(?:call|address) me\b|\bmy name is\b",
            re.IGNORECASE,
        ),
    ),
)
SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
MAX_FACTS = 20
MAX_FACT_CHARS = 300


def _statements(text: str) -> Iterator[tuple[str, str]]:
    for raw in SENTENCE.split(text):
        sentence = " ".join(raw.split())
        if not sentence or sentence.endswith("?"):
            continue  # a question states nothing
        for kind, cue in CUES:
            if cue.search(sentence):
                yield kind, sentence[:MAX_FACT_CHARS]
                break


def propose_facts(rows: Iterable[Row]) -> list[dict[str, Any]]:
    """Candidate facts with evidence, citing only the rows they come from."""
    facts: list[dict[str, Any]] = []
    seen: set[str] = set()

    def add(text: str, kind: str, message_id: int) -> None:
        if text not in seen and len(facts) < MAX_FACTS:
            seen.add(text)
            facts.append(
                {"text": text, "evidence_kind": kind, "evidence": [{"message_id": message_id}]}
            )

    for row in rows:
        if row.role == "user" and row.author == "human":
            for kind, sentence in _statements(row.text):
                add(f"User {kind}: {sentence}", "user-stated", row.message_id)
        elif row.role == "tool_result" and row.status == "ok":
            first = " ".join(row.text.split())[:MAX_FACT_CHARS]
            if first:
                text = f"Tool {row.tool_name or 'call'} succeeded: {first}"
                add(text, "tool-verified", row.message_id)
    return facts


class Heuristic:
    """A rule-based stand-in for a memory model, not a language model.

    It reads the ``m:<id>`` rows in the request, proposes facts from human
    statements that read as preferences, decisions or standing instructions
    (``user-stated``) and from successful tool results (``tool-verified``), and
    answers with a ``tool_use`` of the tool the request offers.
    """

    name = "heuristic"

    async def respond(self, request: SimRequest) -> Outcome:
        # The parsing is CPU work on the request's text: off the event loop, so one large
        # request never stalls the others.
        return await anyio.to_thread.run_sync(self.answer, request)

    def answer(self, request: SimRequest) -> Outcome:
        rows = [row for text in request.texts() for row in parse_rows(text)]
        facts = propose_facts(rows)
        tool = choose_tool(request.body)
        if tool is None:
            lines = [f"- [{f['evidence_kind']}] {f['text']}" for f in facts]
            return Reply.text("\n".join([f"{len(facts)} candidate facts.", *lines]))
        return Reply.tool_use(tool, {"facts": facts})


def choose_tool(body: Mapping[str, Any]) -> str | None:
    """The tool a memory answer goes to: forced, the shadow tool, or the only one offered."""
    names: list[str] = [str(t["name"]) for t in body.get("tools") or []]
    choice = body.get("tool_choice") or {}
    if not names or choice.get("type") == "none":
        return None
    if choice.get("type") == "tool" and choice.get("name") in names:
        return str(choice["name"])
    if SHADOW_TOOL in names:
        return SHADOW_TOOL
    if len(names) == 1:
        return names[0]
    memoryish = [n for n in names if re.search(r"memory|fact|propose", n, re.IGNORECASE)]
    return memoryish[0] if memoryish else None


async def _malformed(request: SimRequest) -> Outcome:
    # Valid JSON with the wrong shape: what a model's bad tool call looks like to a validator.
    tool = choose_tool(request.body) or SHADOW_TOOL
    bad = {"facts": [{"text": 42, "evidence_kind": "hunch", "evidence": "m:unknown"}]}
    return Reply.tool_use(tool, bad)


BUILTIN: dict[str, Callable[[], Responder]] = {
    "heuristic": Heuristic,
    "echo": Echo,
    "hang": lambda: Fixed("hang", Hang()),
    "overloaded": lambda: Fixed("overloaded", Fault.overloaded()),
    "server-error": lambda: Fixed("server-error", Fault.server_error()),
    "truncated": lambda: Fixed("truncated", Truncated()),
    "malformed-tool-input": lambda: Fixed("malformed-tool-input", _malformed),
}


def responder_from_name(name: str, named: Mapping[str, Responder] | None = None) -> Responder:
    """A responder from its name; raises ValueError for an unknown one."""
    if named and name in named:
        return named[name]
    head, _, arg = name.partition(":")
    if head in BUILTIN and not arg:
        return BUILTIN[head]()
    try:
        if head == "rate-limit":
            return Fixed(name, Fault.rate_limited(float(arg) if arg else 1.0))
        if head == "latency" and arg:
            seconds, _, inner = arg.partition(":")
            return Latency(float(seconds), responder_from_name(inner or "heuristic", named), name)
    except ValueError as exc:
        raise ValueError(f"bad responder argument in {name!r}: {exc}") from exc
    known = ", ".join([*BUILTIN, "rate-limit[:SECONDS]", "latency:SECONDS[:NAME]"])
    raise ValueError(f"unknown responder {name!r} (known: {known})")
