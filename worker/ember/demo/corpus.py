"""The demo's corpus and the runtime that plays it through the host API.

The corpus is an Ember import file (docs/import-format.md): threads, generations and messages
with their times. `plot.json` beside it says what the file cannot: the moment the demo calls
"now", the host's system prompt, the category and its models, and which thread the user
interrupts. Rows after "now" are what happens while the demo watches.

`Runtime` is an `ember.host.Host` whose clock is the demo's, and does what an agent runtime does
with each row: a human message is appended; an
assistant message is a real model call to the simulator (the answer is the corpus's own blocks),
captured byte for byte by `ember.host.PrefixCapture` and recorded with `note_prefix`; tool
results go back into the next request; `report_progress` calls go through the control plane;
a turn that ends with text waits for the user, a task that ends says so. Every host call takes
the injected clock's time, so a morning of conversations is written in seconds.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import anthropic
import psycopg

from ember import queries
from ember.host import Host, PrefixCapture, turn_tools
from ember.sim import Scripted

HOST_RESPONDER = "demo-host"  # the simulator's named responder for the host's own turns
HOST_MAX_TOKENS = 4096
THINKING = {"type": "enabled", "budget_tokens": 1024}

# The host's tools, offered in every turn of every thread (with the shadow tool, last).
HOST_TOOLS: list[dict[str, Any]] = [
    {
        "name": "shell",
        "description": "Run a shell command on the team's operations host and return its output.",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "the command line"}},
            "required": ["command"],
        },
    },
    {
        "name": "read_file",
        "description": "Read a file or list a directory in the team's shared workspace.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
    {
        "name": "write_file",
        "description": "Write a file in the team's shared workspace.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
            "required": ["path"],
        },
    },
    {
        "name": "upload",
        "description": "Upload a file from the workspace to a storage bucket.",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "bucket": {"type": "string"},
                "credentials": {"type": "string", "enum": ["default", "release"]},
            },
            "required": ["path", "bucket"],
        },
    },
    {
        "name": "book_train",
        "description": "Book a train ticket; returns the booking with coach and seat.",
        "input_schema": {
            "type": "object",
            "properties": {
                "from": {"type": "string"},
                "to": {"type": "string"},
                "date": {"type": "string", "description": "YYYY-MM-DD"},
                "departure": {"type": "string", "description": "HH:MM"},
            },
            "required": ["from", "to", "date"],
        },
    },
    {
        "name": "report_progress",
        "description": "Send one line of progress to the front desk (main).",
        "input_schema": {
            "type": "object",
            "properties": {"report": {"type": "string"}},
            "required": ["report"],
        },
    },
]


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class SliceError(ValueError):
    """`ember demo --threads` names a slice the demo cannot play."""


@dataclass(frozen=True)
class Category:
    name: str
    description: str
    host_model: str
    light_model: str


@dataclass
class Corpus:
    """The corpus file read into records, with the plot that goes with it."""

    directory: Path
    now: datetime
    host_system: str
    category: Category
    interrupted_thread: str
    isolated_marker: str
    tick_every: timedelta
    threads: list[dict[str, Any]] = field(default_factory=list)
    generations: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def start(self) -> datetime:
        return min(parse_time(t["created_at"]) for t in self.threads)

    @property
    def category_threads(self) -> set[str]:
        return {t["id"] for t in self.threads if t["category"] == self.category.name}

    def thread(self, thread_id: str) -> dict[str, Any]:
        return next(t for t in self.threads if t["id"] == thread_id)

    def only(self, thread_ids: set[str]) -> Corpus:
        """The same corpus cut to some threads (main is always kept: reports go there).

        Checked before anything is written: every id must name a thread of the corpus, and the
        slice must hold the thread the demo's interruption plays in."""
        known = [t["id"] for t in self.threads]
        unknown = sorted(thread_ids - set(known))
        if unknown:
            raise SliceError(
                f"--threads: no thread {', '.join(unknown)} in this corpus; its threads are "
                f"{', '.join(known)}"
            )
        if self.interrupted_thread not in thread_ids:
            raise SliceError(
                f"--threads: a slice needs {self.interrupted_thread} (the thread whose running "
                f"shadow turn the user interrupts) and gets main anyway; for example "
                f"--threads {self.interrupted_thread},{','.join(sorted(thread_ids))}"
            )
        keep = thread_ids | {"main"}
        return Corpus(
            self.directory,
            self.now,
            self.host_system,
            self.category,
            self.interrupted_thread,
            self.isolated_marker,
            self.tick_every,
            [t for t in self.threads if t["id"] in keep],
            [g for g in self.generations if g["thread"] in keep],
            [
                m
                for m in self.messages
                if m["thread"] in keep and (m.get("from_thread") in keep | {None})
            ],
        )


def default_directory() -> Path:
    from ember.embedded import project_root

    return project_root() / "examples" / "corpus"


def load_corpus(directory: Path | None = None) -> Corpus:
    directory = directory or default_directory()
    plot = json.loads((directory / "plot.json").read_text(encoding="utf-8"))
    cat = plot["category"]
    corpus = Corpus(
        directory=directory,
        now=parse_time(plot["now"]),
        host_system=(directory / plot["host_system"]).read_text(encoding="utf-8"),
        category=Category(cat["name"], cat["description"], cat["host_model"], cat["light_model"]),
        interrupted_thread=plot["interrupted_thread"],
        isolated_marker=plot["isolated_marker"],
        tick_every=timedelta(minutes=int(plot["tick_every_minutes"])),
    )
    with (directory / plot["corpus"]).open(encoding="utf-8") as handle:
        header = json.loads(next(handle))
        if header != {"format": "ember", "version": 1}:
            raise ValueError(f"{directory / plot['corpus']}: not an Ember import file, version 1")
        for line in handle:
            if not line.strip():
                continue
            record = json.loads(line)
            {"thread": corpus.threads, "generation": corpus.generations}.get(
                record["type"], corpus.messages
            ).append(record)
    return corpus


class DemoClock:
    """The injected clock: the corpus's times mapped onto today, or real time once pinned off.

    While the corpus is played, every host call and the simulator's cache take the mapped time of
    the row at hand; afterwards the clock is the real one, which is what the worker uses.
    """

    def __init__(self, offset: timedelta) -> None:
        self.offset = offset
        self.pinned: datetime | None = None

    def at(self, corpus_time: datetime) -> datetime:
        return corpus_time + self.offset

    def pin(self, corpus_time: datetime) -> datetime:
        self.pinned = self.at(corpus_time)
        return self.pinned

    def release(self) -> None:
        self.pinned = None

    def __call__(self) -> datetime:
        from datetime import UTC

        return self.pinned or datetime.now(UTC)


@dataclass
class ThreadState:
    model: str
    thinking: bool
    isolated: bool
    messages: list[dict[str, Any]] = field(default_factory=list)  # the host's context
    pending: list[dict[str, Any]] = field(default_factory=list)  # user blocks not yet sent
    in_turn: bool = False


@dataclass
class HostCall:
    """One model call the host made: what the cache-read share of a later replay is measured by."""

    thread: str
    at: datetime
    input_total: int  # every input token of the request: uncached, read and written


class Runtime(Host):
    """Plays corpus rows through the host API, one row at a time, on the injected clock."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        corpus: Corpus,
        clock: DemoClock,
        base_url: str,
        host_script: Scripted,
        say: Callable[[str], None],
    ) -> None:
        super().__init__(conn, clock=clock)
        self.corpus = corpus
        self.demo_clock = clock
        self.host_script = host_script
        self.say = say
        self.capture = PrefixCapture()
        self.client = anthropic.Anthropic(
            base_url=base_url,
            api_key="ember-demo",
            max_retries=0,
            http_client=self.capture.http_client(),
        )
        self.tools = turn_tools(HOST_TOOLS)
        self.state: dict[str, ThreadState] = {}
        self.calls: list[HostCall] = []
        self.last_tick: datetime | None = None
        self.tool_results: dict[str, str] = {}  # report_progress results, by tool call id

    # --- the script ---

    def events(
        self, until: datetime | None = None, after: datetime | None = None
    ) -> Iterator[tuple[datetime, str, dict[str, Any]]]:
        """Threads, generation starts and messages in time order (a thread before its rows)."""
        items: list[tuple[datetime, int, int, str, dict[str, Any]]] = []
        for n, t in enumerate(self.corpus.threads):
            items.append((parse_time(t["created_at"]), 0, n, "thread", t))
        for n, g in enumerate(self.corpus.generations):
            if g["ordinal"] > 1:
                items.append((parse_time(g["started_at"]), 1, n, "generation", g))
        for n, m in enumerate(self.corpus.messages):
            items.append((parse_time(m["created_at"]), 2, n, "message", m))
        items.sort(key=lambda i: (i[0], i[1], i[2]))
        for when, _, _, kind, record in items:
            if (until is None or when <= until) and (after is None or when > after):
                yield when, kind, record

    def play(self, until: datetime | None = None, after: datetime | None = None) -> int:
        played = 0
        for when, kind, record in self.events(until, after):
            self.tick_until(when)
            if after is None:
                self.demo_clock.pin(when)
            self.apply(kind, record)
            played += 1
        return played

    def apply(self, kind: str, record: dict[str, Any]) -> None:
        if kind == "thread":
            self.thread_row(record)
        elif kind == "generation":
            self.generation_row(record)
        else:
            self.message(record)

    def tick_until(self, corpus_time: datetime) -> None:
        """Idle time passes: tick as the worker would have, every tick_every of corpus time."""
        if self.demo_clock.pinned is None:
            return
        if self.last_tick is None:
            self.last_tick = corpus_time
            return
        while corpus_time - self.last_tick >= self.corpus.tick_every:
            self.last_tick += self.corpus.tick_every
            self.demo_clock.pin(self.last_tick)
            row = self.conn.execute(queries.TICK_AT, {"now": self._now()}).fetchone()
            done: dict[str, Any] = (row[0] if row else None) or {}
            at = f"{self.last_tick:%H:%M} tick:"
            if done.get("prefixes_dropped"):
                names = _thread_names(done["prefixes_dropped"])
                self.say(f"{at} the prompt cache of {names} expired: recorded prefix dropped")
            if done.get("signalled"):
                names = _thread_names(done["signalled"])
                self.say(f"{at} idle threads offered to shadow: {names}")

    # --- host API calls, each at the injected clock's time (Host's clock) ---

    def now(self) -> datetime:
        return self.demo_clock()

    def corpus_time(self) -> datetime:
        return self.demo_clock() - self.demo_clock.offset

    def thread_row(self, t: dict[str, Any]) -> None:
        self.create_thread(
            t["id"],
            t["kind"],
            title=t["title"],
            category=t["category"],
            seal_tier=t["seal_tier"],
            model=t["model"],
        )
        has_thinking = any(
            '"thinking"' in (m.get("blocks") or "")
            for m in self.corpus.messages
            if m["thread"] == t["id"]
        )
        self.state[t["id"]] = ThreadState(
            model=t["model"], thinking=has_thinking, isolated=t["seal_tier"] == "isolated"
        )
        if t["kind"] == "main":
            self.ensure_steward_thread()

    def generation_row(self, g: dict[str, Any]) -> None:
        self.start_generation(g["thread"])
        state = self.state[g["thread"]]
        state.messages, state.pending = [], []
        self.say(
            f"{self.corpus_time():%H:%M} {g['thread']}: the context is reset (a new generation)"
        )

    def append(self, m: dict[str, Any], content: str | None = None, blocks: Any = None) -> int:
        """The corpus row as a message; its blocks are stored as the corpus wrote them."""
        return self.append_message(
            m["thread"],
            m["role"],
            m["content"] if content is None else content,
            author=m["author"],
            blocks=blocks,
            blocks_json=m["blocks"] if blocks is None else None,
            tool_call_id=m["tool_call_id"],
            tool_name=m["tool_name"],
            tool_status=m["tool_status"],
            from_thread=m["from_thread"],
        )

    def message(self, m: dict[str, Any]) -> None:
        thread, role = m["thread"], m["role"]
        state = self.state[thread]
        if role == "event" and m.get("from_thread"):
            return  # written by the sender's report_progress call
        if role == "user":
            self.append(m)
            state.pending.append({"type": "text", "text": m["content"]})
        elif role == "tool_result":
            if m["tool_status"] == "pending":
                # The call is still running when the turn ends: the prefix keeps a tool_use
                # without its result (the hot path answers it with a placeholder).
                self.append(m)
                self.end_turn(thread, waiting=True)
                return
            content = self.tool_results.pop(m["tool_call_id"], m["content"])
            self.append(m, content=content)
            state.pending.append(
                {
                    "type": "tool_result",
                    "tool_use_id": m["tool_call_id"],
                    "content": content,
                    **({"is_error": True} if m["tool_status"] == "error" else {}),
                }
            )
        elif role == "assistant":
            self.turn(m)
        else:
            self.append(m)

    def turn(self, m: dict[str, Any]) -> None:
        """One model call: the thread's context plus what came since, answered by the corpus."""
        thread = m["thread"]
        state = self.state[thread]
        if not state.in_turn:
            self.turn_started(thread)
            state.in_turn = True
        if thread == "main":
            self.deliver_events(state)
        blocks: list[dict[str, Any]] = json.loads(m["blocks"])
        if state.pending:
            state.messages.append({"role": "user", "content": state.pending})
            state.pending = []
        calls = [b for b in blocks if b["type"] == "tool_use"]
        if state.isolated:
            # A private journal's turns go to the host's local model, which the demo does not
            # run: the simulator stands in for every remote model, and an isolated thread's
            # content must never appear in anything it receives.
            self.append(m)
            state.messages.append({"role": "assistant", "content": blocks})
        else:
            self.model_call(thread, state, m, blocks, calls)
        for call in calls:
            if call["name"] == "report_progress":
                self.tool_results[call["id"]] = self.report_progress(
                    call["id"], thread, call["input"]["report"]
                )
        if not calls:
            task_done = self.corpus.thread(thread)["status"] == "ended" and not any(
                later["thread"] == thread and later["created_at"] > m["created_at"]
                for later in self.corpus.messages
            )
            self.end_turn(thread, waiting=not task_done, task_done=task_done)

    def model_call(
        self,
        thread: str,
        state: ThreadState,
        m: dict[str, Any],
        blocks: list[dict[str, Any]],
        calls: list[dict[str, Any]],
    ) -> None:
        """The real call: exact bytes captured, the answer stored raw, the prefix noted.

        The request started at the injected clock's time, not the wall clock's the capture
        recorded: the prompt cache's lifetime runs on the demo's clock."""
        self.host_script.push(
            {"content": blocks, "stop_reason": "tool_use" if calls else "end_turn"}
        )
        started = self.now()
        answer = self.client.messages.create(**self.request(state))
        u = answer.usage
        total = u.input_tokens + (u.cache_read_input_tokens or 0)
        total += u.cache_creation_input_tokens or 0
        self.calls.append(HostCall(thread, started, total))
        captured = self.capture.take()
        raw_blocks = json.loads(captured.response)["content"]
        self.append(m, blocks=raw_blocks)
        state.messages.append({"role": "assistant", "content": raw_blocks})
        self.note_prefix(thread, dataclasses.replace(captured, started_at=started))

    def request(self, state: ThreadState) -> dict[str, Any]:
        messages = json.loads(json.dumps(state.messages))
        last = messages[-1]["content"][-1]
        last["cache_control"] = {"type": "ephemeral"}
        body: dict[str, Any] = {
            "model": state.model,
            "max_tokens": HOST_MAX_TOKENS,
            "system": [
                {
                    "type": "text",
                    "text": self.corpus.host_system,
                    "cache_control": {"type": "ephemeral"},
                }
            ],
            "tools": self.tools,
            "messages": messages,
            "extra_headers": {"x-ember-sim-responder": HOST_RESPONDER},
        }
        if state.thinking:
            body["thinking"] = THINKING
        return body

    def deliver_events(self, state: ThreadState) -> None:
        """Main's turn boundary: queued progress reports enter main's context."""
        events = self.deliverable_events("main", at_safe_point=False)
        state.pending[:0] = [{"type": "text", "text": str(e.content)} for e in events]

    def end_turn(self, thread: str, *, waiting: bool, task_done: bool = False) -> None:
        state = self.state[thread]
        if state.in_turn:
            self.turn_ended(thread)
            state.in_turn = False
        if task_done:
            self.task_ended(thread)
            self.set_thread_status(thread, "ended")
        elif waiting:
            self.waiting_for_user(thread)


def _thread_names(by_tenant: dict[str, Any]) -> str:
    """The threads of tick's answer ({tenant: threads}), named within their tenant when it
    names more than one."""
    several = len(by_tenant) > 1
    return ", ".join(
        sorted(
            f"{tenant}/{thread}" if several else str(thread)
            for tenant, threads in by_tenant.items()
            for thread in threads
        )
    )
