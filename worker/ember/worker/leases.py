"""The loop's side of the Pipeline protocol, the same for every pipeline whose runs SQL leases.

Each pipeline claims, renews, releases and checks for cancellation with one SQL call apiece, and
takes a few refusals to mean "this run is no longer ours". Only the statements and those
SQLSTATEs differ, so a pipeline names them once in a LeaseCalls and inherits the four methods
from LeasedPipeline; a copy per pipeline could drift in how a lost lease is handled.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, LiteralString

import psycopg

from ember.tenants import DEFAULT_TENANT
from ember.worker.pipeline import Job


@dataclass(frozen=True)
class LeaseCalls:
    """A pipeline's statements from ember.queries, and the refusals that mean the run is lost."""

    claim: LiteralString  # %(worker)s, %(lease)s -> the plan as JSON, or NULL when nothing is ready
    # Each call about a run may also take %(tenant)s, the tenant its plan named.
    extend: LiteralString  # %(run)s, %(lease_token)s, %(lease)s
    release: LiteralString  # %(run)s, %(lease_token)s
    lost: tuple[str, ...]  # SQLSTATEs of extend and release: finished, expired or taken over
    cancel_requested: LiteralString | None = None  # %(run)s -> bool; None: nothing cancels a run


class LeasedPipeline:
    """claim, extend_lease, release and is_cancelled of pipeline.Pipeline, from `lease_calls`."""

    name: str
    lease_calls: ClassVar[LeaseCalls]

    async def claim(
        self, conn: psycopg.AsyncConnection[Any], worker_name: str, lease: timedelta
    ) -> Job | None:
        cur = await conn.execute(self.lease_calls.claim, {"worker": worker_name, "lease": lease})
        row = await cur.fetchone()
        plan = row[0] if row else None
        if not plan:
            return None
        return Job(
            pipeline=self.name,
            run_id=int(plan["run_id"]),
            lease_token=str(plan["lease_token"]),
            thread_id=str(plan["thread_id"]),
            plan=plan,
            tenant=str(plan.get("tenant", DEFAULT_TENANT)),
        )

    async def extend_lease(
        self, conn: psycopg.AsyncConnection[Any], job: Job, lease: timedelta
    ) -> bool:
        try:
            await conn.execute(
                self.lease_calls.extend,
                {
                    "tenant": job.tenant,
                    "run": job.run_id,
                    "lease_token": job.lease_token,
                    "lease": lease,
                },
            )
        except psycopg.Error as exc:
            if exc.sqlstate in self.lease_calls.lost:
                return False
            raise
        return True

    async def release(self, conn: psycopg.AsyncConnection[Any], job: Job) -> None:
        try:
            await conn.execute(
                self.lease_calls.release,
                {"tenant": job.tenant, "run": job.run_id, "lease_token": job.lease_token},
            )
        except psycopg.Error as exc:
            # Finished, or no longer ours: nothing to hand back.
            if exc.sqlstate not in self.lease_calls.lost:
                raise

    async def is_cancelled(self, conn: psycopg.AsyncConnection[Any], job: Job) -> bool:
        if self.lease_calls.cancel_requested is None:
            return False  # shutdown releases such a run
        cur = await conn.execute(
            self.lease_calls.cancel_requested, {"tenant": job.tenant, "run": job.run_id}
        )
        row = await cur.fetchone()
        return bool(row and row[0])
