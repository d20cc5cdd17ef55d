"""The consolidation pipeline: a light model reads one label-safe group of active facts across
threads and proposes merges, supersedes, retirements and flags (issue 25; the seeds' 「整理组」).

SQL decides everything around the call: which group is due (at most once per
`consolidation_interval`, only after its facts changed), which model may read it (tagged for all
its labels), and whether each action holds (functions/101_consolidation_submit.sql). Here the plan
becomes one request with prompts/consolidation.md and one forced tool, and the answer one outcome
for ember.submit_consolidation_run. A failed call is submitted as a failed run: nothing changes.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ember import faults, queries
from ember.sqlstates import CONSOLIDATION_RUN_LOST
from ember.textversion import text_version
from ember.tools import (
    CONSOLIDATION_TOOL,
    ToolInputError,
    consolidation_tool,
    parse_consolidation,
)
from ember.worker.calls import create_message, describe_error, usage_of
from ember.worker.leases import LeaseCalls, LeasedPipeline
from ember.worker.pipeline import Context, Job

PROMPTS = Path(__file__).resolve().parents[3] / "prompts"
MAX_TOKENS = 4096
# Refusals that mean the run is no longer ours.
LOST = CONSOLIDATION_RUN_LOST


@cache
def consolidation_prompt() -> str:
    return (PROMPTS / "consolidation.md").read_text(encoding="utf-8").strip()


def consolidation_request(model: str, content: str) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": MAX_TOKENS,
        "system": [{"type": "text", "text": consolidation_prompt()}],
        "tools": [consolidation_tool()],
        "tool_choice": {"type": "tool", "name": CONSOLIDATION_TOOL},
        "messages": [{"role": "user", "content": content}],
    }


def actions_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    """The actions of the response's consolidate_facts calls; ToolInputError when malformed."""
    found: list[dict[str, Any]] = []
    for block in response.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            if block.get("name") != CONSOLIDATION_TOOL:
                raise ToolInputError(f"unexpected tool {block.get('name')!r}")
            found += parse_consolidation(block.get("input"))
    return found


class ConsolidationPipeline(LeasedPipeline):
    """Claims consolidation runs and carries each out in one model call."""

    name = "consolidation"
    # Nothing cancels a consolidation run (no cancel_requested); shutdown releases it.
    lease_calls = LeaseCalls(
        claim=queries.CLAIM_CONSOLIDATION,
        extend=queries.EXTEND_CONSOLIDATION_LEASE,
        release=queries.RELEASE_CONSOLIDATION,
        lost=LOST,
    )

    async def execute(self, job: Job, ctx: Context) -> None:
        model = str(job.plan["model"])
        started = time.monotonic()
        usage: dict[str, int] = {}
        request = consolidation_request(model, str(job.plan["content"]))
        digest = text_version(request["system"][0]["text"])
        try:
            response = await create_message(ctx.client, request)
            usage = usage_of(response)
            ctx.observe_call(
                pipeline=self.name,
                model=model,
                seconds=time.monotonic() - started,
                usage=usage,
            )
            outcome = self._outcome("completed", None, usage, started, actions_of(response), digest)
        except asyncio.CancelledError:
            raise
        except ToolInputError as exc:
            outcome = self._outcome("failed", str(exc), usage, started, [], digest)
        except Exception as exc:  # any SDK or transport error: the run fails, nothing changes
            outcome = self._outcome("failed", describe_error(exc), usage, started, [], digest)
        await faults.pause(self.name, "before-submit")
        status = await self._submit(job, ctx, outcome)
        ctx.observe_run(pipeline=self.name, path="consolidation", model=model, status=status)
        ctx.log.info("run %s", status, extra={"event": "run_finished", "status": status})

    @staticmethod
    def _outcome(
        status: str,
        error: str | None,
        usage: dict[str, int],
        started: float,
        actions: list[dict[str, Any]],
        prompt_sha256: str | None = None,
    ) -> dict[str, Any]:
        return {
            "status": status,
            "error": error,
            "usage": usage,
            "latency_ms": max(0, int((time.monotonic() - started) * 1000)),
            "finished_at": datetime.now(UTC).isoformat(),
            "actions": actions,
            # The text_version of prompts/consolidation.md as the request carried it.
            "prompt_sha256": prompt_sha256,
        }

    async def _submit(self, job: Job, ctx: Context, outcome: dict[str, Any]) -> str:
        async with ctx.connection() as conn:
            try:
                cur = await conn.execute(
                    queries.SUBMIT_CONSOLIDATION,
                    {"run": job.run_id, "lease_token": job.lease_token, "outcome": Jsonb(outcome)},
                )
            except psycopg.Error as exc:
                if exc.sqlstate in LOST:
                    ctx.log.warning("outcome refused: %s", exc.diag.message_primary)
                    return "lost"
                raise
            row = await cur.fetchone()
        return str(row[0]["status"]) if row else "lost"
