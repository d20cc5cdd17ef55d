"""Main's control plane for a host: typed wrappers over the SQL in functions/070-072.

A host calls these around its turns:

- before each turn, `turn_identity` (after `read_identity_documents`, so a hot document such as
  prompts/main.md is re-read every main turn and a failed read falls back to the last good text);
- at each safe point inside a running turn, `deliverable_events(at_safe_point=True)`; at the turn
  boundary, `deliverable_events(at_safe_point=False)`;
- when a model calls `side_chat_message`, `side_chat_inspect`, `progress_board` or
  `report_progress`, the wrapper of the same name, whose return value is the tool result;
- to learn that an idle thread has something to take in, LISTEN on `ember_event`: each queued
  event notifies its thread's id at commit.

Every rule (which identity and tools a thread gets, what may be delivered when, who may be
steered or inspected, labels and flow) is decided in SQL; these functions only call it and give
the answers types. Each runs in the caller's transaction: commit to make its writes visible.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict

from ember import queries

Intent = Literal["nudge", "correct", "stop"]
Connection = psycopg.Connection[Any]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReadFailure(_Model):
    """A hot document the host could not read this turn; `error` says why."""

    error: str


class IdentityPart(_Model):
    """One identity prompt document, in prompt order.

    `source` is `read` (read this turn), `last-good` (the read failed or was not passed: the last
    text read successfully), `built-in` (a hot document never read: the minimal role) or `host`
    (a document Ember has never been given: use the host's own copy; `text` is None).
    """

    file: str
    hot: bool
    source: Literal["read", "last-good", "built-in", "host"]
    version: str | None
    text: str | None


class Segment(_Model):
    """The context segment of the generation this identity belongs to; `opened` when it is new."""

    ordinal: int
    opened: bool


class ThreadTool(_Model):
    name: str
    availability: Literal["resident", "per-turn"]
    file_tool: bool


class CallModel(_Model):
    """The model a turn's call goes to and the labels the call carries.

    `model` is the thread's pin; None for an unpinned, unlabelled thread (the host's choice). A
    thread whose labels outgrew its pin never gets here: `turn_identity` refuses it (EM022).
    """

    thread: str
    model: str | None
    labels: list[str]


class Identity(_Model):
    """The identity prompt parts, the tool list and the model of a thread's next turn."""

    thread: str
    kind: Literal["main", "side", "task", "steward"]
    parts: list[IdentityPart]
    identity_version: str
    generation: UUID
    segment: Segment
    model: CallModel
    tools: list[ThreadTool]

    def text(self, host_copies: Mapping[str, str] | None = None) -> str:
        """The identity prompt: the parts joined by a blank line.

        A part with source `host` takes its text from `host_copies`; a missing one is a
        `KeyError`, because a prompt without its base identity is not a smaller prompt but a
        different agent.
        """
        texts = []
        for part in self.parts:
            if part.text is not None:
                texts.append(part.text)
            else:
                texts.append((host_copies or {})[part.file])
        return "\n\n".join(t.strip("\n") for t in texts)

    @property
    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools]


class RegisteredTool(_Model):
    name: str
    kinds: list[str]
    availability: Literal["resident", "per-turn"]
    file_tool: bool
    offered_isolated: bool
    description: str


class Reply(_Model):
    message_id: int
    at: datetime
    text: str
    chars: int
    cut: bool


class ToolCall(_Model):
    tool_call_id: str | None
    name: str | None
    outcome: Literal["ok", "error", "pending", "no-result"]
    result: str | None
    at: datetime


class Progress(_Model):
    event_id: int
    at: datetime
    text: str
    delivered: bool


class Scene(_Model):
    """What `side_chat_inspect` shows main: a small scene of a side chat, not its transcript."""

    thread: str
    title: str | None
    kind: Literal["side", "task"]
    status: Literal["active", "ended", "archived"]
    running: bool
    waiting_user: bool
    last_reply: Reply | None
    tool_calls: list[ToolCall]
    written_paths: list[str]
    progress: Progress | None
    pending_from_main: int


class Event(_Model):
    """An event handed over for delivery into a thread's context (already marked delivered)."""

    event_id: int
    message_id: int
    source: Literal["shell-watch", "thread-event"]
    kind: Literal["shell-exit", "main-message", "progress-report", "task-result"]
    from_thread: str | None
    author: str
    content: str
    created_at: datetime


def identity_files(conn: Connection, thread: str) -> list[str]:
    """The identity documents a thread's turns use, in prompt order."""
    row = conn.execute(queries.IDENTITY_FILES, {"thread": thread}).fetchone()
    return list(row[0]) if row is not None else []


def read_identity_documents(root: Path, files: Iterable[str]) -> dict[str, str | ReadFailure]:
    """Read identity documents relative to `root`: each file's text, or why it could not be read."""
    reads: dict[str, str | ReadFailure] = {}
    for name in files:
        try:
            reads[name] = (root / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reads[name] = ReadFailure(error=f"{type(exc).__name__}: {exc}")
    return reads


def turn_identity(
    conn: Connection,
    thread: str,
    reads: Mapping[str, str | ReadFailure] | None = None,
    *,
    now: datetime | None = None,
) -> Identity:
    """Identity and tools for the thread's next turn; `reads` is what the host read this turn.

    `now` is the host's time (None: the database's clock), as for every call below that takes it.
    """
    payload = None
    if reads is not None:
        payload = Jsonb(
            {
                name: (value.model_dump() if isinstance(value, ReadFailure) else value)
                for name, value in reads.items()
            }
        )
    row = conn.execute(
        queries.TURN_IDENTITY, {"thread": thread, "reads": payload, "now": now}
    ).fetchone()
    assert row is not None
    return Identity.model_validate(row[0])


def identity_for_turn(
    conn: Connection, thread: str, root: Path, *, now: datetime | None = None
) -> Identity:
    """Read the thread's identity documents from `root` and record them: the usual host call."""
    reads = read_identity_documents(root, identity_files(conn, thread))
    return turn_identity(conn, thread, reads, now=now)


def thread_tools(conn: Connection, thread: str) -> list[ThreadTool]:
    rows = conn.execute(queries.THREAD_TOOLS, {"thread": thread}).fetchall()
    return [ThreadTool(name=r[0], availability=r[1], file_tool=r[2]) for r in rows]


def tool_registry(conn: Connection) -> list[RegisteredTool]:
    rows = conn.execute(queries.TOOL_REGISTRY).fetchall()
    return [
        RegisteredTool(
            name=r[0],
            kinds=list(r[1]),
            availability=r[2],
            file_tool=r[3],
            offered_isolated=r[4],
            description=r[5],
        )
        for r in rows
    ]


def register_tool(
    conn: Connection,
    name: str,
    kinds: Iterable[str],
    availability: Literal["resident", "per-turn"],
    description: str,
    *,
    file_tool: bool = False,
    offered_isolated: bool = True,
) -> str:
    """Register a host tool (or change one): a file tool's `path` input shows up in inspect."""
    row = conn.execute(
        queries.REGISTER_TOOL,
        {
            "name": name,
            "kinds": list(kinds),
            "availability": availability,
            "description": description,
            "file_tool": file_tool,
            "offered_isolated": offered_isolated,
        },
    ).fetchone()
    assert row is not None
    return str(row[0])


def side_chat_message(
    conn: Connection,
    tool_call_id: str,
    thread: str,
    intent: Intent,
    message: str,
    *,
    now: datetime | None = None,
) -> str:
    """Main's `side_chat_message` tool: returns the tool result; a replayed call id is a no-op."""
    row = conn.execute(
        queries.SIDE_CHAT_MESSAGE,
        {
            "tool_call_id": tool_call_id,
            "thread": thread,
            "intent": intent,
            "message": message,
            "now": now,
        },
    ).fetchone()
    assert row is not None
    return str(row[0])


def side_chat_inspect(conn: Connection, thread: str) -> Scene:
    """Main's `side_chat_inspect` tool: the scene (serialize it with `model_dump_json`)."""
    row = conn.execute(queries.SIDE_CHAT_INSPECT, {"thread": thread}).fetchone()
    assert row is not None
    return Scene.model_validate(row[0])


def report_progress(
    conn: Connection,
    tool_call_id: str,
    thread: str,
    report: str,
    *,
    now: datetime | None = None,
) -> str:
    """A side chat's `report_progress` tool: queued for main's turn boundary; the tool result."""
    row = conn.execute(
        queries.REPORT_PROGRESS,
        {"tool_call_id": tool_call_id, "thread": thread, "report": report, "now": now},
    ).fetchone()
    assert row is not None
    return str(row[0])


def queue_event(
    conn: Connection,
    thread: str,
    source: Literal["shell-watch", "thread-event"],
    kind: Literal["shell-exit", "progress-report", "task-result"],
    content: str,
    from_thread: str | None = None,
) -> int:
    """Queue an event the host observed (a background shell's exit, a task's result)."""
    row = conn.execute(
        queries.QUEUE_EVENT,
        {
            "thread": thread,
            "source": source,
            "kind": kind,
            "content": content,
            "from_thread": from_thread,
        },
    ).fetchone()
    assert row is not None
    return int(row[0])


def deliverable_events(
    conn: Connection, thread: str, *, at_safe_point: bool, now: datetime | None = None
) -> list[Event]:
    """What may enter the thread's context now, oldest first; each event is handed over once.

    At a safe point inside a running turn only background-shell exits and main's messages;
    at a turn boundary (`at_safe_point=False`) everything queued.
    """
    rows = conn.execute(
        queries.DELIVERABLE_EVENTS, {"thread": thread, "at_safe_point": at_safe_point, "now": now}
    ).fetchall()
    return [
        Event(
            event_id=r[0],
            message_id=r[1],
            source=r[2],
            kind=r[3],
            from_thread=r[4],
            author=r[5],
            content=r[6],
            created_at=r[7],
        )
        for r in rows
    ]


class BoardRow(_Model):
    """One chat on main's progress board, with its latest report (None if it never reported)."""

    thread_id: str
    title: str | None
    kind: Literal["side", "task"]
    status: Literal["active", "ended", "archived"]
    running: bool
    event_id: int | None
    report: str | None
    reported_at: datetime | None
    delivered: bool | None


def progress_board(conn: Connection) -> list[BoardRow]:
    """Main's `progress_board` tool: every chat main may steer, most recent report first."""
    cur = conn.execute(queries.PROGRESS_BOARD)
    names = [c.name for c in cur.description or []]
    return [BoardRow.model_validate(dict(zip(names, row, strict=True))) for row in cur.fetchall()]
