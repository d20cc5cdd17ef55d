"""The shadow pipeline: the hot request builder, the cold reader, and the pipeline the loop runs.

Hot path (seed 000 section 2): the thread's last real request, replayed byte for byte, plus the
model's answer as its raw content blocks, plus one user message that answers any dangling tool
call with a placeholder and asks the shadow question; the old prefix is read from the prompt
cache. Cold path (section 3): the plan's rendered pages, one light-model call per page.

Everything about what to read, which model may read it and what counts as evidence was decided
by SQL in the claim; here the plan is only turned into requests, and the answers into one outcome
for submit_shadow_run.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ember import faults, queries, sqlstates
from ember.cachemark import last_message_marker
from ember.textversion import text_version
from ember.tools import (
    SHADOW_TOOL_NAME,
    ToolInputError,
    parse_shadow_proposals,
    shadow_tool_definition,
)
from ember.worker.calls import (
    CallError,
    add_usage,
    describe_error,
    empty_usage,
    post_message,
    usage_of,
)
from ember.worker.jsonspan import Span, SpanError, scan, splice
from ember.worker.leases import LeaseCalls, LeasedPipeline
from ember.worker.pipeline import Context, Job

PROMPTS = Path(__file__).resolve().parents[3] / "prompts"

# The seed's placeholder, in English: the branch must not treat a call it never ran as evidence.
PLACEHOLDER = (
    "This tool call is still running in the original conversation. This shadow branch did not "
    "run it and has no result for it: it is not evidence of anything."
)
COLD_MAX_TOKENS = 4096
SUBMIT_ATTEMPTS = 8
SUBMIT_RETRY_BASE = 0.25
SUBMIT_RETRY_MAX = 5.0


@cache
def prompt(name: str) -> str:
    return (PROMPTS / f"{name}.md").read_text(encoding="utf-8").strip()


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class PlanError(Exception):
    """The stored prefix cannot be replayed (it is not the request shape the API takes)."""


def shadow_question(rows: list[Any] | None) -> str:
    """The shadow question with the plan's rendered rows, as SQL rendered them."""
    body = "\n".join(str(r) for r in rows or [])
    return f"{prompt('shadow_question')}\n\n{body}" if body else prompt("shadow_question")


@dataclass(frozen=True)
class HotRequest:
    body: bytes
    old_messages: int  # how many messages the stored request held
    marker_added: bool
    prompt_sha256: str | None = None  # the shadow question's text_version, as spliced in


def build_hot_request(
    request_text: str,
    response_text: str,
    rows: list[Any] | None,
    *,
    last_turn_thinking: bool,
) -> HotRequest:
    """The shadow request for a stored prefix, as bytes to post unchanged.

    The stored request keeps every character; only three edits are spliced in: the two new
    messages at the end of `messages`, one cache marker on the old last message's last markable
    block (only when it has none and the request holds fewer than four), and `stream` turned off
    if the host streamed (it folds into no cache key, and the worker reads one JSON answer).
    """
    try:
        req = scan(request_text)
        resp = scan(response_text)
    except SpanError as exc:
        raise PlanError(f"the stored prefix is not JSON: {exc}") from exc
    if req.kind != "object" or "messages" not in req.keys:
        raise PlanError("the stored request has no messages")
    messages = req.keys["messages"]
    if messages.kind != "array" or not messages.items:
        raise PlanError("the stored request's messages are not a non-empty array")
    if resp.kind != "object" or resp.keys.get("content", Span(0, 0, "")).kind != "array":
        raise PlanError("the stored response has no content blocks")

    parsed = json.loads(request_text)
    answer_blocks: list[Any] = json.loads(resp.keys["content"].text(response_text))
    edits: list[tuple[int, int, str]] = []

    # The extra marker: read the old prefix even when the appended tail is longer than the
    # 20-position lookback of a marker at the very end. Markers are not hashed, so the prefix
    # itself is unchanged.
    marker = last_message_marker(request_text, req, parsed)
    if marker is not None:
        edits.append(marker)
    marker_added = marker is not None

    tool_uses = [b for b in answer_blocks if isinstance(b, dict) and b.get("type") in ("tool_use",)]
    question = shadow_question(rows)
    final: list[Any] = []
    for i, use in enumerate(tool_uses):
        text = PLACEHOLDER
        if last_turn_thinking and i == len(tool_uses) - 1:
            # A text block beside tool results would strip the answer's thinking on a
            # last-turn-only model and miss the cache from there on; inside the result it does not.
            text = f"{PLACEHOLDER}\n\n{question}"
        final.append({"type": "tool_result", "tool_use_id": use.get("id"), "content": text})
    if not (last_turn_thinking and tool_uses):
        final.append({"type": "text", "text": question})

    tail = ""
    if answer_blocks:
        raw_content = resp.keys["content"].text(response_text)
        tail += ',{"role":"assistant","content":' + raw_content + "}"
    tail += "," + _compact({"role": "user", "content": final})
    edits.append((messages.end - 1, messages.end - 1, tail))

    stream = req.keys.get("stream")
    if stream is not None and stream.text(request_text) == "true":
        edits.append((stream.start, stream.end, "false"))

    # Cache diagnostics: compare this replay with the request that wrote the prefix, so a miss
    # comes back with the API's reason (diagnostics.cache_miss_reason). A top-level request
    # setting outside system, tools and messages: the prefix and its thinking are unchanged.
    answer_id = json.loads(response_text).get("id") if resp.keys.get("id") else None
    diagnostics = _compact(
        {"previous_message_id": answer_id if isinstance(answer_id, str) else None}
    )
    existing = req.keys.get("diagnostics")
    if existing is not None:
        edits.append((existing.start, existing.end, diagnostics))
    else:
        close = req.end - 1
        edits.append((close, close, f',"diagnostics":{diagnostics}'))

    body = splice(request_text, edits)
    return HotRequest(
        body.encode("utf-8"),
        len(parsed["messages"]),
        marker_added,
        text_version(prompt("shadow_question")),
    )


@cache
def _cold_tool() -> dict[str, Any]:
    # One definition shared by every cold request of the process; the bodies are serialized,
    # never changed in place.
    return shadow_tool_definition()


def cold_request(model: str, page: Any) -> dict[str, Any]:
    """One cold-path call: the cold reader over one rendered page (rows joined by newlines)."""
    text = "\n".join(str(r) for r in page) if isinstance(page, list) else str(page)
    return {
        "model": model,
        "max_tokens": COLD_MAX_TOKENS,
        "system": prompt("cold_reader"),
        "tools": [_cold_tool()],
        # Our own request with no thinking and no cache to keep: forcing the tool is safe here.
        "tool_choice": {"type": "tool", "name": SHADOW_TOOL_NAME},
        "messages": [{"role": "user", "content": text}],
    }


def proposals_from(response: dict[str, Any]) -> list[Any]:
    """The proposals of the shadow tool calls in a raw response.

    No call at all is a failure (the model did not do the job); so is an input that is not a
    list of facts. Facts that fail parsing are kept for SQL to store as rejected proposals.
    """
    calls = [
        b
        for b in response.get("content") or []
        if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == SHADOW_TOOL_NAME
    ]
    if not calls:
        raise CallError(f"no {SHADOW_TOOL_NAME} call in the answer")
    found: list[Any] = []
    for call in calls:
        try:
            found.extend(parse_shadow_proposals(call.get("input")))
        except ToolInputError as exc:
            raise CallError(str(exc)) from exc
    return found


def _outcome(
    status: str,
    error: str | None,
    usage: dict[str, int],
    started: float,
    proposals: list[Any],
    diagnostics: Any = None,
    prompt_sha256: str | None = None,
) -> dict[str, Any]:
    return {
        "status": status,
        "error": error,
        "usage": usage,
        "latency_ms": max(0, int((time.monotonic() - started) * 1000)),
        "finished_at": datetime.now(UTC).isoformat(),
        "proposals": proposals,
        # The response's cache diagnostics, as the API gave them (an object or null).
        "diagnostics": diagnostics if isinstance(diagnostics, dict) else None,
        # The text_version of the prompt text the run's requests carried, None before any.
        "prompt_sha256": prompt_sha256,
    }


class ShadowPipeline(LeasedPipeline):
    """Claims shadow runs and carries them out, hot or cold."""

    name = "shadow"
    lease_calls = LeaseCalls(
        claim=queries.CLAIM_SHADOW,
        extend=queries.EXTEND_SHADOW_LEASE,
        release=queries.RELEASE_SHADOW,
        lost=(sqlstates.LEASE_NOT_HELD,),
        cancel_requested=queries.SHADOW_CANCEL_REQUESTED,
    )

    def __init__(self) -> None:
        self._retention: dict[str, str] = {}

    async def _last_turn(self, ctx: Context, model: str) -> bool:
        if model not in self._retention:
            async with ctx.connection() as conn:
                cur = await conn.execute(queries.MODEL_THINKING_RETENTION, {"model": model})
                row = await cur.fetchone()
            self._retention[model] = str(row[0]) if row and row[0] is not None else "all"
        return self._retention[model] == "last-turn"

    async def execute(self, job: Job, ctx: Context) -> None:
        plan = job.plan
        model = str(plan["model"])
        path = str(plan["path"])
        started = time.monotonic()
        usage = empty_usage()
        proposals: list[Any] = []
        diagnostics: Any = None
        digest: str | None = None
        outcome: dict[str, Any]
        try:
            if path == "hot":
                hot = build_hot_request(
                    str(plan["request"]),
                    str(plan["response"]),
                    plan.get("rows"),
                    last_turn_thinking=await self._last_turn(ctx, model),
                )
                digest = hot.prompt_sha256
                response = await self._call(ctx, model, hot.body, usage)
                usage = add_usage(usage, usage_of(response))
                diagnostics = response.get("diagnostics")
                proposals = proposals_from(response)
            else:
                for page in plan.get("pages") or []:
                    request = cold_request(model, page)
                    digest = text_version(request["system"])
                    body = _compact(request).encode("utf-8")
                    response = await self._call(ctx, model, body, usage)
                    usage = add_usage(usage, usage_of(response))
                    proposals.extend(proposals_from(response))
            outcome = _outcome("completed", None, usage, started, proposals, diagnostics, digest)
        except asyncio.CancelledError:
            if not ctx.cancelled(job.run_id):
                raise  # shutdown: the loop releases the run
            # A human spoke: SQL records the run cancelled (interrupted-by-user) with no proposals.
            # The cancellation was ours to consume; the submit below must still run.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            outcome = _outcome("failed", "interrupted-by-user", usage, started, [], None, digest)
        except (CallError, PlanError) as exc:
            outcome = _outcome("failed", str(exc), usage, started, [], diagnostics, digest)
        except Exception as exc:  # any SDK or transport error: the run fails with what is known
            outcome = _outcome("failed", describe_error(exc), usage, started, [], None, digest)
        await faults.pause(self.name, "before-submit")
        # The call is over: the submit is one short statement, and it runs to the end even if a
        # cancel or the shutdown arrives meanwhile (SQL turns a cancelled run's outcome into
        # 'cancelled' by itself); abandoning it halfway would leave the run to lapse instead.
        submit = asyncio.ensure_future(self._submit(job, ctx, outcome, path, model))
        while True:
            try:
                await asyncio.shield(submit)
                return
            except asyncio.CancelledError:
                if submit.done():
                    raise
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()

    async def _call(
        self, ctx: Context, model: str, body: bytes, usage: dict[str, int]
    ) -> dict[str, Any]:
        t0 = time.monotonic()
        response = await post_message(ctx.client, body)
        ctx.observe_call(
            pipeline=self.name, model=model, seconds=time.monotonic() - t0, usage=usage_of(response)
        )
        return response

    async def _submit(
        self, job: Job, ctx: Context, outcome: dict[str, Any], path: str, model: str
    ) -> None:
        for attempt in range(1, SUBMIT_ATTEMPTS + 1):
            try:
                async with ctx.connection() as conn:
                    cur = await conn.execute(
                        queries.SUBMIT_SHADOW,
                        {
                            "tenant": job.tenant,
                            "run": job.run_id,
                            "lease_token": job.lease_token,
                            "outcome": Jsonb(outcome),
                        },
                    )
                    row = await cur.fetchone()
                break
            except (
                psycopg.errors.DeadlockDetected,
                psycopg.errors.SerializationFailure,
                psycopg.OperationalError,
            ) as exc:
                # The submit is one transaction: a lock-cycle victim wrote nothing, and after a
                # lost connection it either committed (a second try is refused, EM043, below) or
                # wrote nothing. Trying again is safe, and better than letting the run lapse:
                # the answer is paid for. The pool has dropped the connection (and, after a
                # connection error, every idle one), so the next try opens a fresh one; waiting
                # between tries rides out a server restart (about 18 s in all).
                if attempt == SUBMIT_ATTEMPTS:
                    raise
                delay = min(SUBMIT_RETRY_BASE * 2 ** (attempt - 1), SUBMIT_RETRY_MAX)
                ctx.log.warning(
                    "submit failed (%s); retrying in %.2fs",
                    str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                    delay,
                    extra={"event": "submit_retry", "attempt": attempt},
                )
                await asyncio.sleep(delay)
            except psycopg.errors.DataError as exc:
                # The answer holds something the database cannot take (an infinite number,
                # an encoding it refuses): nothing was written. Submitting it again would fail
                # the same way and leave the run to lapse and the model to be called again, so
                # the run fails instead, with the reason and without the answer.
                if outcome["status"] != "completed" or attempt == SUBMIT_ATTEMPTS:
                    raise
                reason = f"the answer could not be stored: {exc.diag.message_primary}"
                outcome = {**outcome, "status": "failed", "error": reason, "proposals": []}
            except psycopg.Error as exc:
                if exc.sqlstate in sqlstates.SHADOW_RUN_LOST:
                    # No longer ours (lease lapsed, or abandoned and re-offered): dropping the
                    # outcome is what keeps the thread from being done twice.
                    ctx.log.warning("outcome refused: %s", exc.diag.message_primary)
                    ctx.observe_run(pipeline=self.name, path=path, model=model, status="lost")
                    return
                raise
        result = row[0] if row else {}
        status = str(result.get("status", outcome["status"]))
        ctx.observe_run(pipeline=self.name, path=path, model=model, status=status)
        if path == "hot" and status == "completed":
            await self._check_cache(job, ctx, model)
        ctx.log.info(
            "run %s",
            status,
            extra={
                "event": "run_finished",
                "status": status,
                "path": path,
                "model": model,
                "error": outcome["error"],
                "proposals": result.get("proposals"),
                "rejected": result.get("rejected"),
                "latency_ms": outcome["latency_ms"],
                **outcome["usage"],
            },
        )

    async def _check_cache(self, job: Job, ctx: Context, model: str) -> None:
        """Count and log a hot run that read too little of its old prefix from the cache; SQL
        judges it and names the likely cause (functions/049_shadow_hot_cache.sql)."""
        try:
            async with ctx.connection() as conn:
                cur = await conn.execute(
                    queries.HOT_CACHE_SHORTFALL, {"tenant": job.tenant, "run": job.run_id}
                )
                row = await cur.fetchone()
        except psycopg.Error as exc:
            ctx.log.warning("hot cache check failed: %s", exc)
            return
        shortfall = row[0] if row else None
        if not shortfall:
            return
        ctx.observe_hot_cache_shortfall(model=model, cause=str(shortfall["cause"]))
        ctx.log.warning(
            "hot run read %s of %s prefix tokens from the cache (%s)",
            shortfall["read_tokens"],
            shortfall["prefix_tokens"],
            shortfall["cause"],
            extra={
                "event": "hot_cache_shortfall",
                "cause": shortfall["cause"],
                "share": float(shortfall["share"]),
                "model": model,
            },
        )
