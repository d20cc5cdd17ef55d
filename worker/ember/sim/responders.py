"""What the simulator answers: responders turn a validated request into an outcome.

Cache accounting does not depend on the responder; it is decided before the
responder runs. An outcome is one of:

- ``Reply``: an assistant message (content blocks and a stop reason);
- ``Fault``: an Anthropic-shaped error (429 with retry-after, 529, 500, ...),
  before the response starts or, when streaming, after ``message_start``;
- ``Truncated``: a 200 whose body stops halfway and the connection drops;
- ``Hang``: no answer until the client disconnects (or the server stops).

Responders by name (``--responder`` or the ``x-ember-sim-responder`` header):
``heuristic``, ``host``, ``echo``, ``hang``, ``rate-limit[:SECONDS]``, ``overloaded``,
``server-error``, ``truncated``, ``malformed-tool-input`` and
``latency:SECONDS[:NAME]``. ``Scripted`` takes canned outcomes and is built in code.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import re
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
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
    # True when a page or thread header came between this row and the previous one: rows on
    # either side may belong to different threads, so nothing pairs across it.
    boundary: bool = False
    # A line of the hot path's key (`m:<id> = #<n> <head>: <opening>...`, ember.render_key_row):
    # text holds only the row's first words, unescaped, until resolve_keys finds the row itself
    # in the replayed conversation.
    key: bool = False


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


# A key line's head starts with its place in the conversation: ``= #<n> ``.
KEY_HEAD = re.compile(r"= #(?P<position>[0-9]{1,9}) ")
# The escapes of a rendered line (ember.render_escape), read back.
_ESCAPE = re.compile(r"\\(\\|n|r|u[0-9a-fA-F]{4})")


def unescape(text: str) -> str:
    """A rendered line's content as it was written: ``\\n`` a line feed, ``\\uXXXX`` that
    character, ``\\\\`` a backslash."""

    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code == "\\":
            return "\\"
        if code == "n":
            return "\n"
        if code == "r":
            return "\r"
        return chr(int(code[1:], 16))

    return _ESCAPE.sub(one, text)


def parse_rows(text: str) -> list[Row]:
    """Rows rendered as ``m:<id> <role>[(<author>)] [<tool> [status]]: <content>``.

    Lines that do not start a row continue the previous row's content. Each line is
    parsed in time linear in its length, and only its first MAX_LINE_CHARS characters.
    """
    rows: list[Row] = []
    boundary = False
    for whole in text.splitlines():
        line = whole[:MAX_LINE_CHARS]
        row = _split_row(line)
        # A key line (`m:<id> = #<n> <head>: <opening>...`): the row is in the conversation
        # above, and its first words identify it there.
        key_head = KEY_HEAD.match(row[1] + " ") if row else None
        head = None
        if row is not None:
            head = _split_head(row[1][key_head.end() :] if key_head else row[1])
        if row is None or head is None:
            if _is_header(line):
                boundary = True
            elif rows:
                rows[-1].text += "\n" + line
            continue
        message_id, _, content = row
        role, author, rest = head
        key = key_head is not None
        if key:
            content = unescape(content.strip().removesuffix("..."))
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
                boundary=boundary,
                key=key,
            )
        )
        boundary = False
    return rows


def _said(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(kind, text) of every message block of a request, in order: kind is the message's
    role for its text, "tool_result" for a tool result's content."""
    said: list[tuple[str, str]] = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            said.append((str(message.get("role")), content))
            continue
        for block in content or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                said.append((str(message.get("role")), str(block.get("text", ""))))
            elif block.get("type") == "tool_result":
                said += [("tool_result", t) for t in _block_texts(block.get("content"))]
    return said


def resolve_keys(rows: list[Row], body: Mapping[str, Any]) -> list[Row]:
    """The rows with each key line replaced by the row it names, read from the replayed
    conversation: the first message of the row's kind whose text begins with the key's first
    words, each message taken once, in order. A key whose row is not found is dropped: the
    responder cites only what it has read."""
    said = _said(body)
    used: set[int] = set()
    out: list[Row] = []
    for row in rows:
        if not row.key:
            out.append(row)
            continue
        kind = "tool_result" if row.role == "tool_result" else row.role
        found = next(
            (
                i
                for i, (k, text) in enumerate(said)
                if i not in used and k == kind and text.strip().startswith(row.text)
            ),
            None,
        )
        if found is None:
            continue
        used.add(found)
        row.text = said[found][1].strip()
        row.key = False
        out.append(row)
    return out


def _is_header(line: str) -> bool:
    """A page header (``# title · thread id · generation ...``) or a steward page's thread line."""
    stripped = line.lstrip()
    return stripped.startswith("# ") or stripped.startswith('thread "')


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
# The same three kinds in Chinese, tried when no English cue matched. Chinese writes no spaces,
# so these look for the words themselves: "我只…", "我们决定…", "以后…别…", "…要用…".
CJK_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "preference",
        re.compile(
            r"我(?:们)?(?:只|更|最|很|真的)?(?:喜欢|偏好|习惯|不喜欢|讨厌|想要|不想|只读|只用|只吃)"
        ),
    ),
    ("decision", re.compile(r"(?:我|我们)(?:已经)?(?:决定|选定|定了|选择了)")),
    (
        "instruction",
        re.compile(r"^(?:以后|今后|从现在起|往后)|(?:务必|一定要|千万别|不要|别|要用|必须)"),
    ),
)
SENTENCE = re.compile(r"(?<=[.!?])\s+|(?<=[。!?;;])|\n+")
QUESTION_END = re.compile(r"[??]$|[吗呢]\W*$")
# A short human reply that explicitly accepts what the agent just proposed.
ACCEPTANCE = re.compile(
    r"^\W*(?:yes|yep|yeah|ok|okay|sure|agreed|sounds good|go ahead|please do|do that|do it|"
    r"let's do (?:that|it))\b"
    r"|^\W*(?:好|行|可以|同意|没问题|就这么办|照办)",
    re.IGNORECASE,
)
MAX_ACCEPTANCE_CHARS = 40
# Tools whose results only acknowledge a message to another thread: they show nothing about the
# world, so a successful one is no fact.
MESSAGING_TOOLS = frozenset({"report_progress", "side_chat_message"})
MAX_FACTS = 20
MAX_FACT_CHARS = 300

# How each writer phrases what it keeps. The shadow reader and the steward stand-in read the
# same rows with the same rules but word some facts differently, as two models would: the
# comparison then has exact matches, matches by shared evidence only, and pairs only a
# semantic judge can see.
VOICES: dict[str, dict[str, str]] = {
    "shadow": {
        "stated": "User {kind}: {text}",
        "tool": "Tool {tool} succeeded: {text}",
        "accepted": "User accepted: {text}",
    },
    "steward": {
        "stated": "User {kind}: {text}",
        "tool": "Verified by {tool}: {text}",
        "accepted": "Agreed with the user: {text}",
    },
}


def _statements(text: str) -> Iterator[tuple[str, str]]:
    for raw in SENTENCE.split(text):
        sentence = " ".join(raw.split())
        if not sentence or QUESTION_END.search(sentence):
            continue  # a question states nothing
        for kind, cue in (*CUES, *CJK_CUES):
            if cue.search(sentence):
                yield kind, sentence[:MAX_FACT_CHARS]
                break


def _one_line(text: str) -> str:
    return " ".join(text.split())[:MAX_FACT_CHARS]


def _is_conclusion(row: Row) -> bool:
    """An assistant row that says something (not only a tool call) and asks nothing."""
    text = row.text.strip()
    return row.role == "assistant" and bool(text) and not text.startswith("[tool call")


def propose_facts(rows: Iterable[Row], voice: str = "shadow") -> list[dict[str, Any]]:
    """Candidate facts with evidence, citing only the rows they come from.

    - ``user-stated``: a human row's sentence that reads as a preference, decision or standing
      instruction (a question never counts);
    - ``user-accepted``: a short human reply that accepts the agent's proposal, cited with the
      assistant row right before it (nothing in between may answer something else);
    - ``tool-verified``: a successful tool result.
    """
    phrasing = VOICES[voice]
    facts: list[dict[str, Any]] = []
    seen: set[str] = set()

    def add(text: str, kind: str, evidence: list[dict[str, Any]]) -> None:
        if text not in seen and len(facts) < MAX_FACTS:
            seen.add(text)
            facts.append({"text": text, "evidence_kind": kind, "evidence": evidence})

    last_assistant: Row | None = None
    for row in rows:
        if row.boundary:
            last_assistant = None
        if row.role == "user" and row.author == "human":
            reply = row.text.strip()
            if (
                last_assistant is not None
                and _is_conclusion(last_assistant)
                and len(reply) <= MAX_ACCEPTANCE_CHARS
                and ACCEPTANCE.search(reply)
            ):
                text = phrasing["accepted"].format(text=_one_line(last_assistant.text))
                pointers = [
                    {"message_id": last_assistant.message_id},
                    {"message_id": row.message_id},
                ]
                add(text, "user-accepted", pointers)
                continue
            for kind, sentence in _statements(row.text):
                text = phrasing["stated"].format(kind=kind, text=sentence)
                add(text, "user-stated", [{"message_id": row.message_id}])
        elif row.role == "tool_result" and row.status == "ok":
            if row.tool_name in MESSAGING_TOOLS:
                continue
            first = _one_line(row.text)
            if first:
                text = phrasing["tool"].format(tool=row.tool_name or "call", text=first)
                add(text, "tool-verified", [{"message_id": row.message_id}])
        elif row.role == "assistant":
            last_assistant = row
    return facts


# --- the steward's tools and the semantic judge's tool ---------------------------------

STEWARD_TOOLS = ("write_fact", "search_memory", "finish")
JUDGE_TOOL = "semantic_judge_pairs"
JUDGE_LINE = re.compile(r"^(?P<side>[PF])(?P<index>\d+):\s*(?P<text>.*)$")
JUDGE_THRESHOLD = 0.5
LABEL_PREFIX = re.compile(r"^[^:]{1,40}:\s+")


def _message_text(content: Any) -> str:
    return "\n".join(_block_texts(content))


_ESCAPE = re.compile(r"\\(\\|n|r|u[0-9a-fA-F]{4})")
_BREAKS = re.compile(r"[\s\x00-\x1f\x7f-\xa0\u2028\u2029]+")


def cleaned(text: str) -> str:
    """A text as Ember stores a fact (functions/054_fact_text.sql): the page's escapes undone,
    every run of white space and separators one space. The duplicate check compares these, so a
    fact copied from a page with its escapes matches the same fact stored clean."""

    def undo(match: re.Match[str]) -> str:
        code = match[1]
        if code == "\\":
            return "\\"
        if code in ("n", "r"):
            return " "
        return chr(int(code[1:], 16))

    return _BREAKS.sub(" ", _ESCAPE.sub(undo, text)).strip()


def steward_answer(body: Mapping[str, Any]) -> Reply:
    """One round of the memory steward, the way a careful steward works through its tools.

    Round 1 searches memory for each candidate fact of the backlog rows (the first message);
    round 2 writes the candidates whose text the searches did not find; the round after that
    (or round 2 when there is nothing to write) finishes through the last row shown.
    """
    messages = list(body.get("messages") or [])
    rows = parse_rows(_message_text(messages[0]["content"])) if messages else []
    if not rows:
        return Reply.text("There is no backlog row to digest in this request.")
    candidates = propose_facts(rows, voice="steward")
    rounds = sum(1 for m in messages if m.get("role") == "assistant")
    last = max(row.message_id for row in rows)
    finish = Reply.tool_use("finish", {"through_message_id": last})
    if rounds == 0 and candidates:
        calls = [
            {"type": "tool_use", "id": new_tool_use_id(), "name": "search_memory",
             "input": {"query": fact["text"]}}
            for fact in candidates
        ]  # fmt: skip
        return Reply(calls, stop_reason="tool_use")
    if rounds == 1 and candidates:
        found = _message_text(messages[-1]["content"]) if messages[-1].get("role") == "user" else ""
        stored = cleaned(found)
        fresh = [fact for fact in candidates if cleaned(fact["text"]) not in stored]
        if fresh:
            calls = [
                {"type": "tool_use", "id": new_tool_use_id(), "name": "write_fact", "input": fact}
                for fact in fresh
            ]
            return Reply(calls, stop_reason="tool_use")
    return finish


def _judge_tokens(text: str) -> set[str]:
    """Words (lower case) and, for Chinese, character pairs: what two phrasings share."""
    body = LABEL_PREFIX.sub("", text.strip(), count=1)
    tokens = {w.lower() for w in re.findall(r"[A-Za-z0-9]+", body) if len(w) > 1}
    cjk = re.findall(r"[\u4e00-\u9fff]", body)
    tokens |= {a + b for a, b in itertools.pairwise(cjk)}
    return tokens


def judge_answer(body: Mapping[str, Any]) -> Reply:
    """The semantic judge's call: pair each P line with each F line that says much the same.

    Not understanding, only overlap: after dropping a leading label ("User preference:",
    "Verified by shell:"), two texts pair when their words (and Chinese character pairs)
    overlap by at least half (Jaccard).
    """
    lines = _message_text((body.get("messages") or [{}])[-1].get("content")).splitlines()
    sides: dict[str, dict[int, set[str]]] = {"P": {}, "F": {}}
    for line in lines:
        match = JUDGE_LINE.match(line.strip())
        if match:
            sides[match["side"]][int(match["index"])] = _judge_tokens(match["text"])
    pairs = []
    for p, ptoks in sorted(sides["P"].items()):
        for f, ftoks in sorted(sides["F"].items()):
            union = ptoks | ftoks
            if union and len(ptoks & ftoks) / len(union) >= JUDGE_THRESHOLD:
                pairs.append({"proposal": p, "fact": f})
    return Reply.tool_use(JUDGE_TOOL, {"pairs": pairs})


# --- the consolidation job's tool (issue 25) ----------------------------------------------
# The rule-based stand-in for the light model that consolidates facts: it merges facts that say
# the same once their writer's label ("User preference: ") is set aside, supersedes an older
# place of living by a newer one (a user who moved from Berlin to Lisbon), and flags a liking
# and a dislike of the same thing for a person, at a confidence below the threshold.

CONSOLIDATION_TOOL = "consolidate_facts"
CONSOLIDATION_LINE = re.compile(
    r"^F(?P<id>\d+) \[(?P<kind>[^\]]+)\] evidence (?P<first>\S*) \.\. (?P<last>\S*),"
    r" threads [^:]*: (?P<text>\".*\")$"
)
PLACE = re.compile(
    r"\b(?:live|lives|living|moved|moving|relocated|based)\s+(?:in|to)\s+(?P<place>[A-Z][\w-]+)"
)
LIKING = re.compile(r"\b(?:like|likes|love|loves|enjoy|enjoys)\s+(?P<thing>\w+)", re.IGNORECASE)
DISLIKE = re.compile(
    r"\b(?:hate|hates|dislike|dislikes|don't like|do not like)\s+(?P<thing>\w+)", re.IGNORECASE
)


def _fact_key(text: str) -> str:
    text = LABEL_PREFIX.sub("", text).lower()
    text = re.sub(r"^(?:the user|user|i)\s+", "", text)
    return " ".join(re.findall(r"\w+", text))


def consolidation_answer(body: Mapping[str, Any]) -> Reply:
    facts: list[dict[str, Any]] = []
    for message in body.get("messages") or []:
        for line in _message_text(message.get("content")).splitlines():
            match = CONSOLIDATION_LINE.match(line.strip())
            if match:
                facts.append(
                    {
                        "id": int(match["id"]),
                        "kind": match["kind"],
                        "first": match["first"],
                        "last": match["last"],
                        "text": json.loads(match["text"]),
                    }
                )
    actions: list[dict[str, Any]] = []
    used: set[int] = set()
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for fact in facts:
        groups.setdefault((fact["kind"], _fact_key(fact["text"])), []).append(fact)
    for same in groups.values():
        if len(same) > 1:
            ids = [f["id"] for f in same]
            used.update(ids)
            actions.append(
                {
                    "action": "merge",
                    "fact_ids": ids,
                    "text": same[0]["text"],
                    "reason": "these facts state the same thing",
                    "confidence": 0.95,
                }
            )
    places = [
        (f, m["place"])
        for f in facts
        if f["id"] not in used
        for m in [PLACE.search(f["text"])]
        if m
    ]
    places.sort(key=lambda p: (p[0]["last"], p[0]["id"]))
    for (older, here), (newer, there) in itertools.pairwise(places):
        if here != there:
            actions.append(
                {
                    "action": "supersede",
                    "fact_ids": [older["id"], newer["id"]],
                    "reason": f"the user moved from {here} to {there}",
                    "confidence": 0.9,
                }
            )
    likes = {m["thing"].lower(): f for f in facts for m in [LIKING.search(f["text"])] if m}
    for fact in facts:
        m = DISLIKE.search(fact["text"])
        if m and m["thing"].lower() in likes:
            other = likes[m["thing"].lower()]
            actions.append(
                {
                    "action": "flag",
                    "fact_ids": [other["id"], fact["id"]],
                    "reason": f"likes and dislikes {m['thing'].lower()}: which holds?",
                    "confidence": 0.4,
                }
            )
    return Reply.tool_use(CONSOLIDATION_TOOL, {"actions": actions})


# --- ember eval's answer and judge tools ------------------------------------------------

EVAL_ANSWER_TOOL = "answer_question"
EVAL_JUDGE_TOOL = "judge_answer"
# The lines of ember eval's requests (ember.evaluation.asking): a label, then a JSON string.
EVAL_FACT_LINE = re.compile(r'^F(?P<n>\d+) \((?P<when>[^)]*)\): (?P<text>".*")$')
EVAL_FIELD_LINE = re.compile(r'^(?P<label>Question|Gold answer|Answer to judge): (?P<text>".*")$')
_EVAL_STOPWORD_TEXT = (
    "a an the and or but of to in on at for from by with about as is are was were be been being "
    "do does did doing have has had i me my we our you your he she it its they them their this "
    "that these those what when where who whom which why how much many any some there here "
    "not no yes if than then so very can could would should will shall may might must just "
    "also into over after before during ever"
)
EVAL_STOPWORDS = frozenset(_EVAL_STOPWORD_TEXT.split())
# A gold answer that says the conversations hold no answer, and an answer that declines.
EVAL_UNANSWERABLE = re.compile(
    r"not mentioned|no information|did not mention|not (?:in|available)\b|unanswerable|"
    r"cannot be answered",
    re.IGNORECASE,
)
EVAL_DECLINES = re.compile(
    r"don't know|do not know|does not say|doesn't say|not in memory|no fact|not mentioned",
    re.IGNORECASE,
)
EVAL_DONT_KNOW = "I don't know: memory does not say."


def _eval_fields(body: Mapping[str, Any]) -> tuple[dict[str, str], dict[int, tuple[str, str]]]:
    """The labelled fields and the numbered facts of ember eval's last user message."""
    fields: dict[str, str] = {}
    facts: dict[int, tuple[str, str]] = {}
    for line in _message_text((body.get("messages") or [{}])[-1].get("content")).splitlines():
        fact = EVAL_FACT_LINE.match(line.strip())
        if fact:
            facts[int(fact["n"])] = (fact["when"], _decoded(fact["text"]))
            continue
        field_ = EVAL_FIELD_LINE.match(line.strip())
        if field_:
            fields[field_["label"]] = _decoded(field_["text"])
    return fields, facts


def _decoded(literal: str) -> str:
    try:
        value = json.loads(literal)
    except ValueError:
        return literal
    return value if isinstance(value, str) else literal


def eval_words(text: str) -> set[str]:
    """Lower-case words and numbers without the stopwords, plus Chinese characters."""
    words = {w.lower() for w in re.findall(r"[A-Za-z0-9]+", text)} - EVAL_STOPWORDS
    return words | set(re.findall(r"[\u4e00-\u9fff]", text))


def _when(stamp: str) -> str:
    """A fact line's "2023-05-08 13:56" as "8 May 2023", the way benchmark answers write dates."""
    try:
        at = datetime.strptime(stamp.strip(), "%Y-%m-%d %H:%M")
    except ValueError:
        return stamp
    return f"{at.day} {at.strftime('%B %Y')}"


def eval_answer(body: Mapping[str, Any]) -> Reply:
    """ember eval's answer: the fact sharing the most words with the question (the first on a
    tie, which is the better ranked), as it is written; for a "when" question, with the date its
    evidence was said. No shared word: memory does not say."""
    fields, facts = _eval_fields(body)
    question = fields.get("Question", "")
    wanted = eval_words(question)
    best, best_score = None, 0
    for n in sorted(facts):
        score = len(wanted & eval_words(facts[n][1]))
        if score > best_score:
            best, best_score = n, score
    if best is None:
        return Reply.tool_use(EVAL_ANSWER_TOOL, {"answer": EVAL_DONT_KNOW, "facts": []})
    when, text = facts[best]
    answer = text
    if re.match(r"^\s*when\b", question, re.IGNORECASE):
        answer = f"{text} (said on {_when(when)})"
    return Reply.tool_use(EVAL_ANSWER_TOOL, {"answer": answer, "facts": [best]})


def eval_judge(body: Mapping[str, Any]) -> Reply:
    """ember eval's verdict, by rule: correct when every word of the gold answer (stopwords
    aside) is in the answer; when the gold answer says the conversations do not tell, correct only
    when the answer declines."""
    fields, _ = _eval_fields(body)
    gold, answer = fields.get("Gold answer", ""), fields.get("Answer to judge", "")
    if EVAL_UNANSWERABLE.search(gold):
        if EVAL_DECLINES.search(answer):
            return Reply.tool_use(
                EVAL_JUDGE_TOOL,
                {"verdict": "correct", "reason": "the gold answer says it is not mentioned, and "
                 "the answer declines"},
            )  # fmt: skip
        return Reply.tool_use(
            EVAL_JUDGE_TOOL,
            {"verdict": "wrong", "reason": "the gold answer says it is not mentioned, but the "
             "answer gives one"},
        )  # fmt: skip
    needed = eval_words(gold) or {w.lower() for w in re.findall(r"\w+", gold)}
    missing = sorted(needed - eval_words(answer))
    if needed and not missing:
        return Reply.tool_use(
            EVAL_JUDGE_TOOL,
            {"verdict": "correct", "reason": "every word of the gold answer is in the answer"},
        )
    return Reply.tool_use(
        EVAL_JUDGE_TOOL,
        {"verdict": "wrong", "reason": "missing from the answer: " + ", ".join(missing[:8])},
    )


class Heuristic:
    """A rule-based stand-in for a memory model, not a language model.

    It reads the ``m:<id>`` rows in the request, proposes facts from human
    statements that read as preferences, decisions or standing instructions
    (``user-stated``), from short replies accepting the agent's proposal
    (``user-accepted``) and from successful tool results (``tool-verified``), and
    answers with a ``tool_use`` of the tool the request offers. A request offering
    the steward's tools gets the steward's rounds (search, write, finish); one
    offering the semantic judge's tool gets pairs by word overlap.
    """

    name = "heuristic"

    async def respond(self, request: SimRequest) -> Outcome:
        # The parsing is CPU work on the request's text: off the event loop, so one large
        # request never stalls the others.
        return await anyio.to_thread.run_sync(self.answer, request)

    def answer(self, request: SimRequest) -> Outcome:
        names = set(request.tool_names)
        if SHADOW_TOOL not in names and set(STEWARD_TOOLS) <= names:
            return steward_answer(request.body)
        if SHADOW_TOOL not in names and JUDGE_TOOL in names:
            return judge_answer(request.body)
        if SHADOW_TOOL not in names and CONSOLIDATION_TOOL in names:
            return consolidation_answer(request.body)
        if SHADOW_TOOL not in names and EVAL_ANSWER_TOOL in names:
            return eval_answer(request.body)
        if SHADOW_TOOL not in names and EVAL_JUDGE_TOOL in names:
            return eval_judge(request.body)
        rows = [row for text in request.texts() for row in parse_rows(text)]
        facts = propose_facts(resolve_keys(rows, request.body))
        tool = choose_tool(request.body)
        if tool is None:
            lines = [f"- [{f['evidence_kind']}] {f['text']}" for f in facts]
            return Reply.text("\n".join([f"{len(facts)} candidate facts.", *lines]))
        return Reply.tool_use(tool, {"facts": facts})


# The first words of Ember's shadow question (prompts/shadow_question.md; a test keeps the two
# equal): a request whose last user message holds them is a shadow turn.
SHADOW_TURN_MARK = "This is a shadow turn"


def is_memory_request(request: SimRequest) -> bool:
    """Whether a request is one of Ember's own (a shadow turn, a cold page, the steward, the
    judge) rather than a turn of the host's conversation."""
    body = request.body
    names = set(request.tool_names)
    choice = body.get("tool_choice") or {}
    if choice.get("type") == "tool" and choice.get("name") == SHADOW_TOOL:
        return True  # the cold reader forces the shadow tool on its own request
    if SHADOW_TOOL not in names and (
        set(STEWARD_TOOLS) <= names or JUDGE_TOOL in names or CONSOLIDATION_TOOL in names
    ):
        return True
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    return last.get("role") == "user" and any(
        SHADOW_TURN_MARK in text for text in _block_texts(last.get("content"))
    )


def _host_reply(request: SimRequest) -> str:
    messages = request.body.get("messages") or []
    said = " ".join(_block_texts(messages[-1].get("content"))) if messages else ""
    said = " ".join(said.split())
    if len(said) > 160:
        said = said[:157] + "..."
    return f"Noted: {said}" if said else "Noted."


class HostTurns:
    """Answers both sides of a host that runs Ember, by the symmetric policy of seed 000 section
    2.1: a turn of the host's own conversation gets a short text reply and never a tool call (in
    particular never `shadow_memory_propose`, which a normal turn may not call although it is
    offered), and Ember's own requests (shadow turns, cold pages, the steward, the judge) get the
    heuristic responder's answer. One `ember sim --responder host` serves a host and its worker.
    """

    name = "host"

    def __init__(self) -> None:
        self.heuristic = Heuristic()

    async def respond(self, request: SimRequest) -> Outcome:
        if is_memory_request(request):
            return await self.heuristic.respond(request)
        return Reply.text(_host_reply(request))


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
    "host": HostTurns,
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
