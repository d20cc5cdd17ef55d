"""The request log: every request as received, what it cost and how it ended.

Entries appear when a request arrives (so a test can wait for a hanging request)
and are completed when it ends; completed entries are appended to the optional
JSONL file, one object per line. API keys are never recorded.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

# Headers worth keeping: they change what the request means, and carry no secret.
KEPT_HEADERS = ("anthropic-version", "anthropic-beta", "content-type", "x-ember-sim-responder")


@dataclass
class LoggedRequest:
    seq: int
    method: str
    path: str
    received_at: float  # cache clock, epoch seconds
    raw: bytes
    headers: dict[str, str]
    body: Any = None  # the parsed JSON, None when the body was not JSON
    responder: str | None = None
    status: int | None = None
    usage: dict[str, Any] | None = None
    cache: dict[str, Any] | None = None  # breakpoints, where the read came from, ...
    cost_usd: float | None = None  # list-price estimate, not a bill
    error: dict[str, Any] | None = None  # the Anthropic-shaped error body sent, if any
    response: dict[str, Any] | None = None  # the message sent, streamed or not
    disconnected: bool = False
    finished: bool = False
    body_bytes: int | None = None  # the body's full size, when only its start is kept

    def __post_init__(self) -> None:
        if self.body_bytes is None:
            self.body_bytes = len(self.raw)

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8", "replace")

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "method": self.method,
            "path": self.path,
            "received_at": self.received_at,
            "headers": self.headers,
            "body_text": self.text,
            "body_bytes": self.body_bytes,
            "responder": self.responder,
            "status": self.status,
            "usage": self.usage,
            "cache": self.cache,
            "cost_usd": self.cost_usd,
            "error": self.error,
            "response": self.response,
            "disconnected": self.disconnected,
        }


def open_private_log(path: Path) -> TextIO:
    """Open a log for appending, readable by its owner only: it holds whole request bodies.

    A missing directory is created 0700; a link at `path` is refused rather than followed, and an
    existing file of ours is narrowed to 0600 (an older `--log` file may have been 0644).
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    if os.fstat(fd).st_uid == os.geteuid():
        os.fchmod(fd, 0o600)
    return os.fdopen(fd, "a", encoding="utf-8")


@dataclass
class RequestLog:
    path: Path | None = None
    # In memory, only the newest ``keep`` entries (None: all). A long-running `ember sim`
    # must not grow without bound; the JSONL file keeps everything.
    keep: int | None = None
    _entries: list[LoggedRequest] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _file: TextIO | None = None
    _seq: int = 0

    def start(
        self, method: str, path: str, received_at: float, raw: bytes, headers: dict[str, str]
    ) -> LoggedRequest:
        kept = {k: v for k, v in headers.items() if k.lower() in KEPT_HEADERS}
        with self._changed:
            self._seq += 1
            entry = LoggedRequest(self._seq, method, path, received_at, raw, kept)
            self._entries.append(entry)
            if self.keep is not None and len(self._entries) > self.keep:
                del self._entries[: len(self._entries) - self.keep]
            self._changed.notify_all()
        return entry

    def finish(self, entry: LoggedRequest) -> None:
        with self._changed:
            if entry.finished:
                return
            entry.finished = True
            if self.path is not None:
                if self._file is None:
                    self._file = open_private_log(self.path)
                self._file.write(json.dumps(entry.to_json(), ensure_ascii=False) + "\n")
                self._file.flush()
            self._changed.notify_all()

    def entries(self) -> list[LoggedRequest]:
        with self._changed:
            return list(self._entries)

    def clear(self) -> None:
        with self._changed:
            self._entries.clear()

    def wait_for(
        self, predicate: Callable[[list[LoggedRequest]], bool], timeout: float = 5.0
    ) -> list[LoggedRequest]:
        """Block until ``predicate(entries)`` holds; TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(list(self._entries)):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("the request log did not reach the expected state")
                self._changed.wait(left)
            return list(self._entries)

    def close(self) -> None:
        with self._changed:
            if self._file is not None:
                self._file.close()
                self._file = None
