"""Saying why the worker is idle: once it has claimed nothing for a while, it asks
`ember.work_status()` and logs each reason work is waiting, once per idle spell.

A worker that sits idle while rows wait (the steward's thread never created, shadow never
activated, a label no model is tagged for) used to say nothing at all; an operator had to know
which SQL to ask. The reasons and their wording are SQL's (functions/095_work_status.sql); this
only decides when to ask and logs what comes back. A reason is logged again only after the
worker has worked in between, or after the reason went away and came back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import suppress
from typing import Any, Protocol

import psycopg

from ember import queries

log = logging.getLogger("ember.worker")

# The states that mean work exists that this worker is not doing.
REPORTED = ("waiting", "ready", "none")


class _Idle(Protocol):
    """What the watcher needs of the worker (loop.Worker)."""

    last_busy: float
    running: dict[Any, Any]
    stopping: asyncio.Event
    pool: Any

    @property
    def pipeline_names(self) -> list[str]: ...


async def watch(worker: _Idle, after: float) -> None:
    """Until the worker stops: after `after` seconds without a claim, log the waiting reasons."""
    logged: set[tuple[str, str, str]] = set()
    every = max(0.2, min(after / 2, 15.0))
    while not worker.stopping.is_set():
        with suppress(TimeoutError):
            await asyncio.wait_for(worker.stopping.wait(), every)
        if worker.stopping.is_set():
            return
        if worker.running or time.monotonic() - worker.last_busy < after:
            logged.clear()
            continue
        try:
            async with worker.pool.connection() as conn:
                cur = await conn.execute(queries.WORK_STATUS)
                names = [c.name for c in cur.description or []]
                rows = [dict(zip(names, r, strict=True)) for r in await cur.fetchall()]
        except psycopg.Error as exc:
            log.debug("work_status failed: %s", exc)
            continue
        current = set()
        for row in rows:
            if row["state"] not in REPORTED:
                continue
            if row["state"] == "ready" and row["pipeline"] in worker.pipeline_names:
                continue  # ready for us: the next claim takes it, nothing to explain
            key = (row["pipeline"], row["reason"], row["detail"])
            current.add(key)
            if key in logged:
                continue
            log.info(
                "idle: %s %s: %s",
                row["pipeline"],
                row["reason"],
                row["detail"],
                extra={
                    "event": "idle_waiting",
                    "pipeline": row["pipeline"],
                    "state": row["state"],
                    "reason": row["reason"],
                    "items": row["items"],
                    "oldest": row["oldest"],
                    "until": row["until"].isoformat() if row["until"] else None,
                },
            )
        logged = current
