"""The contract between the worker loop and the pipelines it runs (shadow, steward).

The loop owns waiting, claiming turns, concurrency, leases and signals; a pipeline owns one kind
of job: how to claim it (one SQL call) and how to carry it out (model calls, then its one write
procedure). Keeping the loop ignorant of what a job means lets every pipeline share the same
LISTEN connection, concurrency limit, graceful shutdown and metrics.
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol, runtime_checkable

import psycopg
from anthropic import AsyncAnthropic

from ember.tenants import DEFAULT_TENANT


@dataclass(frozen=True)
class Job:
    """One claimed unit of work: the run the lease covers and the plan SQL returned for it."""

    pipeline: str
    run_id: int
    lease_token: str
    thread_id: str
    plan: dict[str, Any] = field(repr=False)
    # The tenant the run belongs to, as its plan names it; every call about the run passes it.
    tenant: str = DEFAULT_TENANT


@runtime_checkable
class Context(Protocol):
    """What the loop lends a pipeline while it executes one job."""

    @property
    def client(self) -> AsyncAnthropic:
        """The shared model client (calls.make_client)."""
        ...

    @property
    def worker_name(self) -> str: ...

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger whose records carry the pipeline, run and thread."""
        ...

    def connection(self) -> AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]:
        """A short-lived autocommit connection for one write; returned when the block ends."""
        ...

    def cancelled(self, run_id: int) -> bool:
        """True once the loop has seen (and confirmed in SQL) that the run was cancelled."""
        ...

    def observe_call(
        self, *, pipeline: str, model: str, seconds: float, usage: dict[str, int]
    ) -> None:
        """Record one model call's latency and tokens in the metrics."""
        ...

    def observe_run(self, *, pipeline: str, path: str, model: str, status: str) -> None:
        """Record one finished run in the metrics."""
        ...

    def observe_hot_cache_shortfall(self, *, model: str, cause: str) -> None:
        """Count a hot run that read too little of its prefix from the cache, by likely cause."""
        ...


@runtime_checkable
class Pipeline(Protocol):
    """A kind of job the worker runs.

    `claim` makes one SQL claim call on the given connection (autocommit) and returns a Job, or
    None when nothing is ready. `execute` calls the model and submits through the pipeline's one
    write procedure; it must stop promptly when `ctx.cancelled(job.run_id)` turns true or its
    asyncio task is cancelled (cancelling the task aborts an in-flight AsyncAnthropic request).
    `extend_lease` keeps the lease alive while execute runs (guarded by the lease token; False
    when the run is no longer ours), and `release` hands an unfinished run back so it is offered
    again at once, used on shutdown.
    """

    name: str

    async def claim(
        self, conn: psycopg.AsyncConnection[Any], worker_name: str, lease: timedelta
    ) -> Job | None: ...

    async def execute(self, job: Job, ctx: Context) -> None: ...

    async def extend_lease(
        self, conn: psycopg.AsyncConnection[Any], job: Job, lease: timedelta
    ) -> bool: ...

    async def release(self, conn: psycopg.AsyncConnection[Any], job: Job) -> None: ...

    async def is_cancelled(self, conn: psycopg.AsyncConnection[Any], job: Job) -> bool:
        """Whether SQL says the job's run was cancelled: the check behind each ember_cancel hint."""
        ...
