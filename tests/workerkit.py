"""Helpers for the worker tests: a host-side setup, an in-process job context, and a worker
process whose JSON log lines can be waited on (events, never fixed sleeps)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anthropic
import psycopg
from anthropic import AsyncAnthropic

from ember.host import Host, PrefixCapture, turn_tools
from simfixtures import words

ROOT = Path(__file__).resolve().parents[1]
EMBER = str(Path(sys.executable).parent / "ember")
API_KEY = "sk-ant-test-NEVER-IN-LOGS-0123456789"


def as_role(url: str, role: str = "ember_worker") -> str:
    """The same login, acting as `role` from its first statement on (libpq's `options`), so a
    process started with this URL has that role's privileges and no others: the worker runs as
    ember_worker, the role docs/operations.md prescribes, and any direct table read fails."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-crole%3D{role}"


def prepare(url: str, threads: list[str] | None = None) -> None:
    """main, shadow switched on, and the given side threads."""
    with psycopg.connect(url, autocommit=True) as conn:
        host = Host(conn)
        host.create_thread("main", "main")
        conn.execute("SELECT ember.shadow_activate()")
        for t in threads or []:
            host.create_thread(t, "side")


@contextmanager
def host_on(url: str) -> Iterator[Host]:
    with psycopg.connect(url, autocommit=True) as conn:
        yield Host(conn)


HOT_SYSTEM = "You are a careful assistant for a small team. " + words("system", 2400)


def host_turn(
    url: str,
    base_url: str,
    *,
    model: str = "claude-sonnet-4-6",
    tools: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
) -> int:
    """One real host turn on thread t1 through the SDK (the human's row, the call with cache
    marks, the answer's row), its exact request bytes noted as the thread's prefix and the
    thread left waiting for the user: a thread ready for the hot path. Returns the human row."""
    cc = {"type": "ephemeral"}
    with host_on(url) as host:
        said = "From now on I prefer answers in metric units. " + words("ctx", 200)
        mid = host.append_message("t1", "user", said, author="human")
        capture = PrefixCapture()
        client = anthropic.Anthropic(
            base_url=base_url, api_key=API_KEY, max_retries=0, http_client=capture.http_client()
        )
        message = client.messages.create(
            model=model,
            max_tokens=4096,
            system=[{"type": "text", "text": HOT_SYSTEM, "cache_control": cc}],  # type: ignore[list-item]
            tools=turn_tools(tools or []),  # type: ignore[arg-type]
            messages=[
                {"role": "user", "content": [{"type": "text", "text": said, "cache_control": cc}]}
            ],
            **(extra or {}),
        )
        host.append_message(
            "t1",
            "assistant",
            "".join(b.text for b in message.content if b.type == "text"),
            blocks=[b.model_dump(mode="json") for b in message.content],
        )
        assert host.note_prefix("t1", capture.take())
        host.waiting_for_user("t1")
    return mid


def offer_cold(url: str, thread: str, text: str, *, human: bool = True) -> int:
    """A row and a standing offer on `thread` (no prefix, so the cold path)."""
    with host_on(url) as host:
        mid = host.append_message(
            thread, "user" if human else "assistant", text, author="human" if human else None
        )
        host.task_ended(thread)
    return mid


def runs(url: str) -> list[dict[str, Any]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(
            "SELECT id, thread_id, path, model, status, error, worker, input_tokens,"
            " cache_read_tokens, cache_write_5m_tokens, cache_write_1h_tokens, output_tokens"
            " FROM ember.shadow_runs ORDER BY id"
        )
        names = [c.name for c in cur.description or []]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def proposals(url: str) -> list[dict[str, Any]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(
            "SELECT run_id, thread_id, text, evidence_kind, evidence, validation_error"
            " FROM ember.shadow_proposals ORDER BY id"
        )
        names = [c.name for c in cur.description or []]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


class InProcessContext:
    """A pipeline Context for running one job inside the test process."""

    def __init__(self, url: str, base_url: str, role: str | None = "ember_worker") -> None:
        self.url = as_role(url, role) if role else url
        self.client = AsyncAnthropic(base_url=base_url, api_key=API_KEY, max_retries=0)
        self.worker_name = "test"
        self.log = logging.LoggerAdapter(logging.getLogger("test"), {})
        self.calls: list[dict[str, Any]] = []
        self.finished: list[str] = []
        self.cancelled_runs: set[int] = set()
        self.shortfalls: list[str] = []

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            yield conn

    def cancelled(self, run_id: int) -> bool:
        return run_id in self.cancelled_runs

    def observe_call(
        self, *, pipeline: str, model: str, seconds: float, usage: dict[str, int]
    ) -> None:
        self.calls.append({"model": model, **usage})

    def observe_run(self, *, pipeline: str, path: str, model: str, status: str) -> None:
        self.finished.append(status)

    def observe_hot_cache_shortfall(self, *, model: str, cause: str) -> None:
        self.shortfalls.append(cause)


class WorkerProcess:
    """`ember worker` as a child process; its JSON log lines are collected as they arrive."""

    def __init__(
        self,
        url: str,
        base_url: str,
        *args: str,
        env: dict[str, str] | None = None,
        name: str = "w1",
        cond: threading.Condition | None = None,
        role: str | None = "ember_worker",
    ) -> None:
        full_env = {
            **os.environ,
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": API_KEY,
            "PYTHONUNBUFFERED": "1",
            **(env or {}),
        }
        full_env.pop("DATABASE_URL", None)
        self.cmd = [
            EMBER,
            "worker",
            "--database-url",
            as_role(url, role) if role else url,
            "--name",
            name,
            "--log-format",
            "json",
            "--poll-interval",
            "30",
            *args,
        ]
        self.proc = subprocess.Popen(
            self.cmd,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.events: list[dict[str, Any]] = []
        self._cond = cond or threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                try:
                    entry = json.loads(line)
                except ValueError:
                    entry = {"msg": line.rstrip("\n")}
                entry["_at"] = time.monotonic()
                self.events.append(entry)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(
        self,
        event: str,
        predicate: Callable[[dict[str, Any]], bool] | None = None,
        *,
        count: int = 1,
        timeout: float = 30.0,
    ) -> list[dict[str, Any]]:
        """The first `count` log entries with this event (and predicate); fails on timeout."""

        def found() -> list[dict[str, Any]]:
            return [
                e
                for e in self.events
                if e.get("event") == event and (predicate is None or predicate(e))
            ]

        with self._cond:
            ok = self._cond.wait_for(
                lambda: len(found()) >= count or self.proc.poll() is not None, timeout
            )
            hits = found()
        if len(hits) < count:
            tail = "\n".join(self.lines[-20:])
            raise AssertionError(
                f"no {count} x {event!r} within {timeout}s (exit {self.proc.poll()}):\n{tail}"
            )
        assert ok or hits
        return hits[:count]

    def ready(self) -> WorkerProcess:
        # Generous: on a loaded machine importing the SDK alone can take seconds.
        self.wait_for("ready", timeout=90)
        return self

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout)
        self._reader.join(5)
        return rc

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self._reader.join(5)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


def wait_all(workers: list[WorkerProcess], event: str, count: int, timeout: float = 30.0) -> None:
    """Until the workers (sharing one condition) logged `count` entries of `event` between them."""

    def total() -> int:
        return sum(1 for w in workers for e in w.events if e.get("event") == event)

    cond = workers[0]._cond
    with cond:
        if not cond.wait_for(lambda: total() >= count, timeout):
            raise AssertionError(f"only {total()} x {event!r} of {count} within {timeout}s")
