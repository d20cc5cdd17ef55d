"""The steward pipeline: one wake of the memory steward, as rounds of model call and steward_step.

SQL decided everything in the claim: what to read (the plan's pages, already written to the
steward's thread as its first row), which model may read it, what the tools do. Here the plan is
turned into requests that carry only prompts/steward.md and only the steward's tools; each answer
goes back through ember.steward_step, whose tool results are the next request's user turn, until
`finish` completes the run or the round limit fails it. A model error fails the run through
ember.fail_steward_run; in both failures nothing is marked digested and the rows are read again
by the next wake.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from functools import cache
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ember import faults, queries, sqlstates
from ember.embed import Embedder, EmbedderUnavailable, load_embedder
from ember.textversion import text_version
from ember.tools import steward_call_error, steward_tool_definitions
from ember.worker.calls import create_message, describe_error, usage_of
from ember.worker.leases import LeaseCalls, LeasedPipeline
from ember.worker.pipeline import Context, Job

PROMPTS = Path(__file__).resolve().parents[3] / "prompts"
MAX_TOKENS = 4096
CACHE = {"type": "ephemeral"}
EMBED_BATCH = 64

log = logging.getLogger("ember.worker.steward")


@cache
def steward_prompt() -> str:
    return (PROMPTS / "steward.md").read_text(encoding="utf-8").strip()


def steward_request(model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """One round's request: the steward prompt and tools, the conversation so far.

    Two cache breakpoints: the system prompt (with the tools before it, the same every wake) and
    the last block of the conversation, so each round reads the previous round's prefix.
    """
    sent = copy.deepcopy(messages)
    last = sent[-1]["content"]
    if isinstance(last, str):
        last = [{"type": "text", "text": last}]
        sent[-1]["content"] = last
    last[-1]["cache_control"] = CACHE
    return {
        "model": model,
        "max_tokens": MAX_TOKENS,
        "system": [{"type": "text", "text": steward_prompt(), "cache_control": CACHE}],
        "tools": steward_tool_definitions(),
        "messages": sent,
    }


# The same error steward_step records when it finds the seal first (051_steward_step.sql).
SEALED = "thread-isolated: a thread this run read was sealed"


def tool_calls(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        b
        for b in response.get("content") or []
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]


def rejections(calls: list[dict[str, Any]]) -> dict[str, str]:
    """{tool_use id: reason} for the calls the tool models refuse."""
    found: dict[str, str] = {}
    for call in calls:
        reason = steward_call_error(str(call.get("name")), call.get("input"))
        if reason is not None:
            found[str(call.get("id"))] = reason
    return found


# The steward_max_tool_calls and max_fact_chars defaults (db/migrations/0042_output_bounds.sql):
# SQL answers the calls past them with an error and applies nothing, so embedding them would
# only cost time (ten thousand calls took minutes of embedding). If an operator raises the
# settings, the calls past these are still applied and their facts embedded afterwards.
EMBED_CALLS = 100
EMBED_CHARS = 2000


def texts_to_embed(calls: list[dict[str, Any]], refused: dict[str, str]) -> dict[str, str]:
    """{tool_use id: text} whose embedding the step can use: new facts' text, search queries."""
    found: dict[str, str] = {}
    for call in calls[:EMBED_CALLS]:
        ident = str(call.get("id"))
        tool_input = call.get("input")
        if ident in refused or not isinstance(tool_input, dict):
            continue
        if call.get("name") in ("write_fact", "merge_facts"):
            found[ident] = str(tool_input["text"])
        elif call.get("name") == "search_memory":
            found[ident] = str(tool_input["query"])
    return {k: v for k, v in found.items() if len(v) <= EMBED_CHARS}


def vector_literal(vector: list[float]) -> str:
    return "[" + ",".join(repr(x) for x in vector) + "]"


class StewardPipeline(LeasedPipeline):
    """Claims steward runs and carries them out, round by round."""

    name = "steward"
    # A human message does not cancel a steward run: it adds to the backlog, it does not make
    # what the steward is reading wrong. Sealing a thread the run read does: the call out
    # holds that thread's rows. Shutdown is a task cancel, handled by release.
    lease_calls = LeaseCalls(
        claim=queries.CLAIM_STEWARD,
        extend=queries.EXTEND_STEWARD_LEASE,
        release=queries.RELEASE_STEWARD,
        lost=sqlstates.STEWARD_RUN_LOST,
        cancel_requested=queries.STEWARD_CANCEL_REQUESTED,
    )

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder
        self._embedder_missing = False

    # --- one wake ---

    async def execute(self, job: Job, ctx: Context) -> None:
        plan = job.plan
        model = str(plan["model"])
        max_rounds = int(plan.get("max_rounds") or 12)
        messages: list[dict[str, Any]] = [{"role": "user", "content": plan["content"]}]
        status = "running"
        digest: str | None = None  # the text_version of the steward prompt as sent
        try:
            for _ in range(max_rounds):
                started = time.monotonic()
                request = steward_request(model, messages)
                digest = text_version(request["system"][0]["text"])
                response = await create_message(ctx.client, request)
                latency = time.monotonic() - started
                ctx.observe_call(
                    pipeline=self.name, model=model, seconds=latency, usage=usage_of(response)
                )
                await faults.pause(self.name, "before-submit")
                result = await self._step(job, ctx, response, int(latency * 1000), digest)
                if result is None:
                    return  # no longer ours
                status = str(result["status"])
                if status != "running":
                    break
                if not response.get("content"):
                    # An empty assistant turn cannot be sent back; nothing can follow it.
                    status = await self._fail(
                        job, ctx, "the model answered with no content", digest
                    )
                    break
                messages.append({"role": "assistant", "content": response.get("content") or []})
                results = [
                    {k: r[k] for k in ("type", "tool_use_id", "content", "is_error")}
                    for r in result.get("results") or []
                ]
                if results:
                    messages.append({"role": "user", "content": results})
                else:
                    messages.append({"role": "user", "content": str(result["reminder"])})
            if status == "running":
                status = await self._fail(job, ctx, f"round limit: {max_rounds} rounds", digest)
        except asyncio.CancelledError:
            if not ctx.cancelled(job.run_id):
                raise  # shutdown: the loop releases the run
            # A thread the run read was sealed: the call was aborted, and the run fails here
            # as its next step would have failed it. Nothing it read is marked digested.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            status = await self._fail(job, ctx, SEALED, digest)
        except Exception as exc:  # any SDK or transport error: the run fails, nothing digested
            status = await self._fail(job, ctx, describe_error(exc), digest)
        ctx.observe_run(pipeline=self.name, path="steward", model=model, status=status)
        ctx.log.info("run %s", status, extra={"event": "run_finished", "status": status})
        await self.embed_pending(ctx)

    async def _step(
        self,
        job: Job,
        ctx: Context,
        response: dict[str, Any],
        latency_ms: int,
        prompt_sha256: str | None,
    ) -> dict[str, Any] | None:
        calls = tool_calls(response)
        refused = rejections(calls)
        embeddings = await self._embed(texts_to_embed(calls, refused))
        async with ctx.connection() as conn:
            try:
                cur = await conn.execute(
                    queries.STEWARD_STEP,
                    {
                        "tenant": job.tenant,
                        "run": job.run_id,
                        "token": job.lease_token,
                        "response": Jsonb(response),
                        "embeddings": Jsonb(embeddings),
                        "latency_ms": latency_ms,
                        "rejections": Jsonb(refused),
                        "prompt_sha256": prompt_sha256,
                    },
                )
            except psycopg.Error as exc:
                if exc.sqlstate in sqlstates.STEWARD_RUN_LOST:
                    ctx.log.warning("step refused: %s", exc.diag.message_primary)
                    return None
                raise
            row = await cur.fetchone()
        return dict(row[0]) if row else None

    async def _fail(
        self, job: Job, ctx: Context, error: str, prompt_sha256: str | None = None
    ) -> str:
        async with ctx.connection() as conn:
            try:
                await conn.execute(
                    queries.FAIL_STEWARD,
                    {
                        "tenant": job.tenant,
                        "run": job.run_id,
                        "token": job.lease_token,
                        "error": error,
                        "prompt_sha256": prompt_sha256,
                    },
                )
            except psycopg.Error as exc:
                if exc.sqlstate in sqlstates.STEWARD_RUN_LOST:
                    return "lost"
                raise
        return "failed"

    # --- embeddings ---

    def embedder(self) -> Embedder | None:
        if self._embedder is None and not self._embedder_missing:
            try:
                self._embedder = load_embedder()
            except EmbedderUnavailable as exc:
                self._embedder_missing = True
                log.warning("no embedder; facts are found by text only: %s", exc)
        return self._embedder

    async def _embed(self, texts: dict[str, str]) -> dict[str, list[float]]:
        embedder = self.embedder()
        if not texts or embedder is None:
            return {}
        try:
            vectors = await asyncio.to_thread(embedder.embed, list(texts.values()))
        except EmbedderUnavailable as exc:
            self._embedder_missing = True
            self._embedder = None
            log.warning("no embedder; facts are found by text only: %s", exc)
            return {}
        return dict(zip(texts, vectors, strict=True))

    async def embed_pending(self, ctx: Context) -> int:
        """Embed the active facts written without an embedding; returns how many were stored."""
        embedder = self.embedder()
        if embedder is None:
            return 0
        stored = 0
        while True:
            async with ctx.connection() as conn:
                cur = await conn.execute(queries.FACTS_TO_EMBED, {"limit": EMBED_BATCH})
                rows = await cur.fetchall()
            if not rows:
                return stored
            vectors = await asyncio.to_thread(embedder.embed, [str(r[1]) for r in rows])
            before = stored
            async with ctx.connection() as conn:
                for (fact_id, _), vector in zip(rows, vectors, strict=True):
                    try:
                        await conn.execute(
                            queries.SET_FACT_EMBEDDING,
                            {
                                "fact": fact_id,
                                "embedding": vector_literal(vector),
                                "model": embedder.name,
                            },
                        )
                        stored += 1
                    except psycopg.Error as exc:
                        if (
                            exc.sqlstate != sqlstates.INVALID_EMBEDDING
                        ):  # another worker embedded it first
                            raise
            if len(rows) < EMBED_BATCH or stored == before:
                return stored
