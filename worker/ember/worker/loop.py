"""The worker loop: wait for work, claim it, run it with bounded concurrency, keep leases alive,
tick for the fleet, abort cancelled runs, and shut down without losing or duplicating anything.

It is deliberately ignorant of what a job means (pipeline.py): every rule about data is SQL, and
every model call belongs to a pipeline. What it owns is the process: connections, notifications,
timing and signals.
"""

from __future__ import annotations

import asyncio
import logging
import random
import signal
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import psycopg
from anthropic import AsyncAnthropic
from psycopg.conninfo import conninfo_to_dict

from ember import faults, queries
from ember.commands.base import EXIT_MIGRATIONS
from ember.servererror import server_terminated
from ember.worker import idle
from ember.worker.config import WorkerConfig
from ember.worker.consolidation import ConsolidationPipeline
from ember.worker.metrics import Metrics
from ember.worker.pipeline import Job, Pipeline
from ember.worker.shadow import ShadowPipeline
from ember.worker.steward import StewardPipeline

log = logging.getLogger("ember.worker")


def available_pipelines() -> dict[str, Callable[[], Pipeline]]:
    return {
        "shadow": ShadowPipeline,
        "consolidation": ConsolidationPipeline,
        "steward": StewardPipeline,
    }


def describe_server(url: str) -> str:
    """host:port (or socket directory) of a connection string, for messages; never credentials."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the configured database"
    host = str(params.get("host") or "localhost")
    port = params.get("port")
    return f"{host}:{port}" if port else host


class Backoff:
    """Exponential backoff with jitter, 0.25 s doubling to a cap."""

    def __init__(self, first: float = 0.25, cap: float = 15.0) -> None:
        self.first, self.cap, self.current = first, cap, first

    def reset(self) -> None:
        self.current = self.first

    def next(self) -> float:
        delay = self.current * random.uniform(0.8, 1.2)
        self.current = min(self.cap, self.current * 2)
        return delay


@dataclass
class _Running:
    pipeline: Pipeline
    job: Job
    task: asyncio.Task[None] | None = None
    cancelled: bool = False  # confirmed in SQL: the run was cancelled by a human message
    lost: bool = False  # the lease is gone: the run is no longer ours
    extra: dict[str, Any] = field(default_factory=dict)


class _JobLog(logging.LoggerAdapter[logging.Logger]):
    """Adds the job's fields to every record, merged with the call's own extra fields."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs


class _JobContext:
    """The Context a pipeline gets for one job (pipeline.Context)."""

    def __init__(self, worker: Worker, running: _Running) -> None:
        self._worker = worker
        self._running = running
        self.log = _JobLog(
            logging.getLogger(f"ember.worker.{running.pipeline.name}"),
            {
                "pipeline": running.pipeline.name,
                "run_id": running.job.run_id,
                "thread_id": running.job.thread_id,
            },
        )

    @property
    def client(self) -> AsyncAnthropic:
        return self._worker.client

    @property
    def worker_name(self) -> str:
        return self._worker.config.name

    def connection(self) -> Any:
        return self._worker.pool.connection()

    def cancelled(self, run_id: int) -> bool:
        return self._running.cancelled and self._running.job.run_id == run_id

    def observe_call(
        self, *, pipeline: str, model: str, seconds: float, usage: dict[str, int]
    ) -> None:
        self._worker.metrics.observe_call(pipeline, model, seconds, usage)

    def observe_run(self, *, pipeline: str, path: str, model: str, status: str) -> None:
        self._worker.metrics.runs.labels(pipeline, path, model, status).inc()

    def observe_hot_cache_shortfall(self, *, model: str, cause: str) -> None:
        self._worker.metrics.hot_cache_shortfalls.labels(model, cause).inc()


class Pool:
    """A few autocommit connections reused across jobs; a broken one is dropped, not returned."""

    def __init__(self, worker: Worker, size: int) -> None:
        self._worker = worker
        self._idle: list[psycopg.AsyncConnection[Any]] = []
        self._size = size

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        conn = self._idle.pop() if self._idle else await self._worker.connect("pool")
        try:
            yield conn
        except BaseException as exc:
            await conn.close()
            if conn.broken or (
                isinstance(exc, psycopg.OperationalError)
                and (exc.sqlstate or "08")[:2] in ("08", "57")
            ):
                # The connection failed, not the statement: the idle ones were opened before
                # the same failure (a restart ends them all) and would fail the next try too.
                await self.close()
            raise
        if conn.closed or conn.broken or len(self._idle) >= self._size:
            await conn.close()
        else:
            self._idle.append(conn)

    async def close(self) -> None:
        while self._idle:
            await self._idle.pop().close()


class Worker:
    def __init__(
        self, config: WorkerConfig, client: AsyncAnthropic, metrics: Metrics | None = None
    ) -> None:
        config.check()
        self.config = config
        self.client = client
        self.metrics = metrics or Metrics()
        known = available_pipelines()
        self.pipelines: list[Pipeline] = [known[name]() for name in config.pipelines]
        self.pool = Pool(self, size=config.concurrency + 2)
        self.wake = asyncio.Event()
        self.stopping = asyncio.Event()
        self.running: dict[tuple[str, int], _Running] = {}
        self._claim_conns: dict[int, psycopg.AsyncConnection[Any]] = {}
        self._claimers = min(config.claimers, config.concurrency)
        self._reserved = 0  # slots held by claims in progress
        self._rotation = 0
        self._background: set[asyncio.Task[Any]] = set()
        self.server = describe_server(config.database_url)
        self._generation: Any = None  # (postmaster start, stats reset): see connect()
        self._outage_logged = False
        self.last_busy = time.monotonic()  # the last claim or finished run, for idle.watch

    @property
    def pipeline_names(self) -> list[str]:
        return [p.name for p in self.pipelines]

    # --- connections ---

    def _db_failed(self, what: str, exc: BaseException, event: str) -> None:
        """Log a failed database call in one line, never a traceback; a server that crashed,
        restarts or shuts down is said once per outage (every connection fails at once then).

        A closed connection alone does not tell a crash from one session ended by an
        administrator; the next connection does (`connect` compares the server's generation).
        """
        if server_terminated(exc, connection_loss=False):
            self._server_terminated()
            return
        log.warning("%s: %s", what, exc, extra={"event": event})

    def _server_terminated(self) -> None:
        if self._outage_logged:
            return
        self._outage_logged = True
        log.error(
            "the database server at %s terminated (a crash, a restart or a shutdown); reconnecting",
            self.server,
            extra={"event": "db_terminated", "server": self.server},
        )
        # Every connection opened before is dead too, even if it does not know yet: drop them
        # now rather than fail once more on each.
        self._spawn(self._drop_connections())

    async def _drop_connections(self) -> None:
        await self.pool.close()
        for slot, conn in list(self._claim_conns.items()):
            self._claim_conns.pop(slot, None)
            with suppress(psycopg.Error):
                await conn.close()

    async def connect(self, purpose: str) -> psycopg.AsyncConnection[Any]:
        """A new connection; it also tells whether the server restarted since the last one
        (its start time, or the statistics a crash recovery discards, changed)."""
        conn = await self._open(purpose)
        try:
            cur = await conn.execute(queries.SERVER_GENERATION)
            generation = await cur.fetchone()
        except psycopg.Error:
            await conn.close()
            raise
        if self._generation is not None and generation != self._generation:
            self._server_terminated()
        self._generation = generation
        self._outage_logged = False
        return conn

    async def _open(self, purpose: str) -> psycopg.AsyncConnection[Any]:
        return await psycopg.AsyncConnection.connect(
            self.config.database_url,
            autocommit=True,
            application_name=f"ember-worker:{self.config.name}:{purpose}",
            keepalives=1,
            keepalives_idle=30,
            keepalives_interval=10,
            keepalives_count=3,
            connect_timeout=10,
        )

    async def connect_with_retry(self, purpose: str) -> psycopg.AsyncConnection[Any] | None:
        """A connection, retried with backoff while the server is unreachable; None on stop."""
        backoff = Backoff()
        while not self.stopping.is_set():
            try:
                return await self.connect(purpose)
            except psycopg.OperationalError as exc:
                delay = backoff.next()
                if server_terminated(exc, connection_loss=False):
                    # Starting up or recovering after a crash: part of the outage already said.
                    self._db_failed("connect failed", exc, "db_unreachable")
                    with suppress(TimeoutError):
                        await asyncio.wait_for(self.stopping.wait(), delay)
                    continue
                reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else "no answer"
                log.warning(
                    "database at %s unreachable (%s); retrying in %.1fs",
                    self.server,
                    reason,
                    delay,
                    extra={"event": "db_unreachable", "server": self.server},
                )
                with suppress(TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), delay)
        return None

    # --- the main loop ---

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop, sig)
        first = await self.connect_with_retry("claim")
        if first is None:
            return 0
        self._claim_conns[0] = first
        try:
            tick_interval = self.config.tick_interval or await self._tick_interval()
        except psycopg.Error as exc:
            log.error(
                "database at %s is not ready for the worker (%s); run `ember migrate` first",
                self.server,
                exc.diag.message_primary or type(exc).__name__,
                extra={"event": "db_not_migrated", "server": self.server},
            )
            await first.close()
            return EXIT_MIGRATIONS
        if self.config.metrics_port is not None:
            port = self.metrics.serve(self.config.metrics_port, self.config.metrics_host)
            log.info("metrics on port %d", port, extra={"event": "metrics", "port": port})
        listening = asyncio.Event()
        first_tick = asyncio.Event()
        self._spawn(self._listen(listening))
        self._spawn(self._ticker(tick_interval, first_tick))
        self._spawn(idle.watch(self, self.config.idle_report_after))
        # Ready means listening and past the first tick (which abandons runs a dead worker left
        # behind), so the first claims already see those threads offered again.
        with suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(listening.wait(), first_tick.wait()), 10)
        log.info(
            "worker ready",
            extra={
                "event": "ready",
                "worker": self.config.name,
                "pipelines": ",".join(p.name for p in self.pipelines),
                "concurrency": self.config.concurrency,
                "server": self.server,
            },
        )
        while not self.stopping.is_set():
            self.wake.clear()
            await self._fill()
            with suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self.config.poll_interval)
        await self._shutdown()
        return 0

    def request_stop(self, sig: signal.Signals | None = None) -> None:
        if not self.stopping.is_set():
            log.info(
                "stopping: no new claims, %d run(s) in flight",
                len(self.running),
                extra={"event": "stopping", "signal": sig.name if sig else None},
            )
        self.stopping.set()
        self.wake.set()

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _tick_interval(self) -> float:
        cur = await self._claim_conns[0].execute(queries.TICK_INTERVAL)
        row = await cur.fetchone()
        return float(row[0]) if row and row[0] else 60.0

    async def _claim_connection(self, slot: int) -> psycopg.AsyncConnection[Any] | None:
        conn = self._claim_conns.get(slot)
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                await conn.close()
            conn = await self.connect_with_retry("claim")
            if conn is None:
                return None
            self._claim_conns[slot] = conn
        return conn

    async def _fill(self) -> None:
        """Claim until every slot is busy or no pipeline has work.

        A claim is a round trip and a scan in SQL; one claimer at a time leaves a fast model
        waiting on claims. Once the first claim finds work, a second claimer on its own connection
        runs beside it (claims skip each other's threads), so a burst is taken up twice as fast
        while an idle wake-up still costs a single claim.
        """
        if not await self._claim_one(0):
            return
        helpers = [asyncio.create_task(self._claim_loop(slot)) for slot in range(1, self._claimers)]
        await self._claim_loop(0)
        await asyncio.gather(*helpers)

    async def _claim_loop(self, slot: int) -> None:
        while await self._claim_one(slot):
            pass

    async def _claim_one(self, slot: int) -> bool:
        """One claim on claimer `slot`'s connection; True when a job was started."""
        if self.stopping.is_set() or len(self.running) + self._reserved >= self.config.concurrency:
            return False
        self._reserved += 1
        try:
            conn = await self._claim_connection(slot)
            if conn is None:
                return False
            job: Job | None = None
            pipeline: Pipeline | None = None
            n = len(self.pipelines)
            try:
                for i in range(n):
                    pipeline = self.pipelines[(self._rotation + i) % n]
                    job = await pipeline.claim(conn, self.config.name, self.config.lease)
                    if job is not None:
                        # The next claim starts at the next pipeline: neither can starve the other.
                        self._rotation = (self._rotation + i + 1) % n
                        break
            except psycopg.Error as exc:
                # A lost connection is reopened on the next attempt; any other error (a refused
                # claim) is logged and retried at the next wake-up or poll, never a crash.
                self._db_failed("claim failed", exc, "claim_failed")
                if isinstance(exc, psycopg.OperationalError) or conn.broken:
                    await conn.close()
                if isinstance(exc, psycopg.errors.DeadlockDetected):
                    self.wake.set()  # the victim of a lock cycle: the work is still there
                return False
            if job is None or pipeline is None:
                return False
            self.metrics.claims.labels(pipeline.name).inc()
            running = _Running(pipeline, job)
            self.last_busy = time.monotonic()
            self.running[(pipeline.name, job.run_id)] = running
            running.task = asyncio.create_task(self._run_job(running))
        finally:
            self._reserved -= 1
        log.info(
            "claimed",
            extra={
                "event": "claimed",
                "pipeline": pipeline.name,
                "run_id": job.run_id,
                "thread_id": job.thread_id,
                "path": job.plan.get("path"),
                "model": job.plan.get("model"),
            },
        )
        return True

    async def _run_job(self, running: _Running) -> None:
        ctx = _JobContext(self, running)
        keeper = asyncio.create_task(self._keep_lease(running))
        try:
            await faults.pause(running.pipeline.name, "before-call")
            await running.pipeline.execute(running.job, ctx)
        except asyncio.CancelledError:
            if self.stopping.is_set() and not running.lost:
                await self._release(running)
            elif running.lost:
                ctx.log.warning("lease lost; the run is dropped", extra={"event": "lease_lost"})
        except Exception as exc:
            # The run stays 'running' until its lease lapses; tick() then abandons and re-offers
            # it. Never a crash of the worker.
            if isinstance(exc, psycopg.OperationalError):
                self._db_failed("run failed to finish", exc, "run_error")
            else:
                ctx.log.exception("run failed to finish", extra={"event": "run_error"})
        finally:
            keeper.cancel()
            with suppress(asyncio.CancelledError):
                await keeper
            self.running.pop((running.pipeline.name, running.job.run_id), None)
            self.last_busy = time.monotonic()
            self.wake.set()

    async def _release(self, running: _Running) -> None:
        try:
            async with self.pool.connection() as conn:
                await running.pipeline.release(conn, running.job)
            self.metrics.releases.labels(running.pipeline.name).inc()
            log.info(
                "released",
                extra={
                    "event": "released",
                    "pipeline": running.pipeline.name,
                    "run_id": running.job.run_id,
                    "thread_id": running.job.thread_id,
                },
            )
        except psycopg.Error as exc:
            self._db_failed("release failed (the lease will lapse instead)", exc, "release_failed")

    async def _keep_lease(self, running: _Running) -> None:
        """Renew the lease at a third of its length; each renewal also checks for a cancel."""
        every = max(0.05, self.config.lease.total_seconds() / 3)
        while True:
            await asyncio.sleep(every)
            try:
                async with self.pool.connection() as conn:
                    ours = await running.pipeline.extend_lease(conn, running.job, self.config.lease)
                    cancelled = ours and await running.pipeline.is_cancelled(conn, running.job)
            except psycopg.Error as exc:
                self._db_failed("lease renewal failed", exc, "lease_retry")
                continue
            if not ours:
                running.lost = True
                if running.task:
                    running.task.cancel()
                return
            if cancelled:
                self._abort(running)
                return

    def _abort(self, running: _Running) -> None:
        if running.cancelled:
            return
        running.cancelled = True
        self.metrics.cancels.labels(running.pipeline.name).inc()
        log.info(
            "cancelled (a human message, or a thread it read was sealed); aborting the call",
            extra={
                "event": "cancel",
                "pipeline": running.pipeline.name,
                "run_id": running.job.run_id,
                "thread_id": running.job.thread_id,
            },
        )
        if running.task:
            running.task.cancel()

    async def _on_cancel_hint(self, payload: str) -> None:
        """ember_cancel carries a run id; anyone may send one, so SQL decides."""
        try:
            run_id = int(payload)
        except ValueError:
            return
        for running in [r for r in self.running.values() if r.job.run_id == run_id]:
            try:
                async with self.pool.connection() as conn:
                    confirmed = await running.pipeline.is_cancelled(conn, running.job)
            except psycopg.Error as exc:
                self._db_failed("cancel check failed", exc, "cancel_check_failed")
                continue
            if confirmed:
                self._abort(running)

    # --- LISTEN ---

    async def _listen(self, listening: asyncio.Event) -> None:
        backoff = Backoff()
        while not self.stopping.is_set():
            conn = await self.connect_with_retry("listen")
            if conn is None:
                return
            try:
                async with conn:
                    await conn.execute(queries.LISTEN_WAKE)
                    await conn.execute(queries.LISTEN_CANCEL)
                    backoff.reset()
                    listening.set()
                    log.info("listening", extra={"event": "listening", "server": self.server})
                    # Anything sent while we were not listening is found by claiming now.
                    self.wake.set()
                    while not self.stopping.is_set():
                        async for note in conn.notifies(timeout=self.config.listen_timeout):
                            if note.channel == "ember_wake":
                                self.wake.set()
                            elif note.channel == "ember_cancel":
                                self._spawn(self._on_cancel_hint(note.payload))
                        await conn.execute(queries.KEEPALIVE)
            except psycopg.Error as exc:
                delay = backoff.next()
                if server_terminated(exc, connection_loss=False):
                    self._db_failed("listen connection lost", exc, "listen_lost")
                else:
                    log.warning(
                        "listen connection lost (%s); reconnecting in %.1fs",
                        str(exc).strip() or type(exc).__name__,
                        delay,
                        extra={"event": "listen_lost", "server": self.server},
                    )
                with suppress(TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), delay)

    # --- tick ---

    async def _ticker(self, interval: float, first_tick: asyncio.Event) -> None:
        """tick() for the fleet: every worker asks each interval, and one tick an interval runs.

        fleet_tick() ticks only when nobody has within half an interval, and holds nothing between
        calls: a worker that dies, or stops while its connections stay open, is replaced at the
        next worker's next interval.
        """
        conn: psycopg.AsyncConnection[Any] | None = None
        name = self.config.name
        while not self.stopping.is_set():
            try:
                if conn is None or conn.closed or conn.broken:
                    conn = await self.connect_with_retry("tick")
                    if conn is None:
                        return
                cur = await conn.execute(queries.FLEET_TICK, {"worker": name, "every": interval})
                row = await cur.fetchone()
                result = row[0] if row else None
                if result is not None:
                    self.metrics.ticks.inc()
                    if result.pop("ticker_before", None) != name:
                        log.info("this worker ticks for the fleet", extra={"event": "ticker"})
                    if result.get("runs_abandoned") or result.get("ready"):
                        log.info("tick", extra={"event": "tick", **result})
            except psycopg.Error as exc:
                self._db_failed("tick failed", exc, "tick_failed")
                if conn is not None and (isinstance(exc, psycopg.OperationalError) or conn.broken):
                    await conn.close()
                    conn = None
            first_tick.set()
            with suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), interval)
        if conn is not None:
            await conn.close()

    # --- shutdown ---

    async def _shutdown(self) -> None:
        tasks = [r.task for r in self.running.values() if r.task is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self.config.grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        for conn in self._claim_conns.values():
            await conn.close()
        await self.pool.close()
        await self.client.close()
        log.info("stopped", extra={"event": "stopped"})
