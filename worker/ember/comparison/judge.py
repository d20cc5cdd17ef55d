"""Semantic judging: which shadow proposals and steward facts say the same thing.

The rules are SQL's (`ember.semantic_groups`, functions/061_semantic_judge.sql): the candidates
(isolated threads removed before any prompt exists), their grouping by label-category set, which
groups are skipped and why, the light model each group is routed to, the shortlist of facts and
the message text itself. Python calls the model through the worker's client, validates the answer
with the pydantic model of the tool, and hands it to `ember.submit_judge_run`, which stores it or
fails the group.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anthropic
import psycopg
from anthropic import AsyncAnthropic
from psycopg.types.json import Jsonb
from pydantic import ValidationError

from ember import faults, queries
from ember.textversion import text_version
from ember.tools import SEMANTIC_JUDGE_TOOL, SemanticJudgement, semantic_judge_tool
from ember.worker.calls import CallError, create_message, describe_error, usage_of, without_nul

PROMPT = Path(__file__).resolve().parents[3] / "prompts" / "semantic_judge.md"
SHORTLIST_K = 5
MAX_TOKENS = 2048


@dataclass(frozen=True)
class Item:
    side: str  # 'proposal' or 'fact'
    item_id: int
    thread_id: str
    text: str


@dataclass
class Group:
    categories: tuple[str, ...]
    proposals: list[Item] = field(default_factory=list)
    facts: list[Item] = field(default_factory=list)
    model: str | None = None
    skipped: str | None = None  # why no model is called for this group
    content: str | None = None  # the user message, rendered by ember.semantic_judge_content

    @property
    def label(self) -> str:
        return "{" + ", ".join(self.categories) + "}"


@dataclass
class GroupResult:
    group: Group
    status: str  # 'completed', 'failed', 'skipped' or 'dry-run'
    detail: str = ""
    judge_run_id: int | None = None
    pairs: int = 0
    request: dict[str, Any] | None = None


def _prompt_text() -> str:
    return PROMPT.read_text(encoding="utf-8")


def _items(side: str, rows: list[dict[str, Any]]) -> list[Item]:
    return [Item(side, int(r["id"]), str(r["thread_id"]), str(r["text"])) for r in rows]


def load_groups(
    conn: psycopg.Connection[Any], since: datetime | None, until: datetime | None
) -> list[Group]:
    """The window's groups as ember.semantic_groups decides them, in label-set order."""
    return [
        Group(
            categories=tuple(categories),
            proposals=_items("proposal", proposals),
            facts=_items("fact", facts),
            model=model,
            skipped=skipped,
            content=content,
        )
        for categories, model, skipped, proposals, facts, content in conn.execute(
            queries.SEMANTIC_GROUPS, {"since": since, "until": until, "k": SHORTLIST_K}
        )
    ]


def build_request(group: Group) -> dict[str, Any]:
    """The Messages API request for one group: indexes and texts only, no ids of any kind."""
    assert group.model is not None and group.content is not None
    return {
        "model": group.model,
        "max_tokens": MAX_TOKENS,
        "system": _prompt_text(),
        "messages": [{"role": "user", "content": group.content}],
        "tools": [semantic_judge_tool()],
        "tool_choice": {"type": "tool", "name": SEMANTIC_JUDGE_TOOL},
    }


def _pairs_from(response: dict[str, Any]) -> list[list[int]]:
    """The judge's pairs, or ValueError with the reason the reply is unusable."""
    content = response.get("content")
    calls = [
        b
        for b in (content if isinstance(content, list) else [])
        if isinstance(b, dict)
        and b.get("type") == "tool_use"
        and b.get("name") == SEMANTIC_JUDGE_TOOL
    ]
    if len(calls) != 1:
        raise ValueError(f"expected one {SEMANTIC_JUDGE_TOOL} call, got {len(calls)}")
    try:
        judgement = SemanticJudgement.model_validate(calls[0].get("input"))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"reply does not fit the tool schema: {where}: {first['msg']}") from None
    return [[p.proposal, p.fact] for p in judgement.pairs]


def judge_group(
    conn: psycopg.Connection[Any],
    client: AsyncAnthropic,
    runner: asyncio.Runner,
    group: Group,
    since: datetime | None,
    until: datetime | None,
) -> GroupResult:
    """Call the model for one group and store the outcome; a bad reply fails only this group."""
    request = build_request(group)
    started = datetime.now(UTC)
    clock = time.monotonic()
    usage: dict[str, int] = {}
    pairs: list[list[int]] = []
    error: str | None = None
    faults.pause_blocking("judge", "before-call")
    try:
        response = runner.run(create_message(client, request))
        usage = usage_of(response)
        pairs = _pairs_from(response)
    except (anthropic.APIError, CallError) as exc:
        error = f"model call failed: {describe_error(exc)}"
    except ValueError as exc:
        error = str(exc)
    outcome = {
        "categories": list(group.categories),
        "model": group.model,
        "window_since": since.isoformat() if since else None,
        "window_until": until.isoformat() if until else None,
        "proposal_ids": [p.item_id for p in group.proposals],
        "fact_ids": [f.item_id for f in group.facts],
        "status": "failed" if error else "completed",
        "error": error,
        "pairs": pairs,
        "usage": usage,
        "started_at": started.isoformat(),
        "finished_at": datetime.now(UTC).isoformat(),
        "latency_ms": int((time.monotonic() - clock) * 1000),
        # Of prompts/semantic_judge.md as this request carried it (it is read for every group).
        "prompt_sha256": text_version(request["system"]),
    }
    faults.pause_blocking("judge", "before-submit")
    # The error may quote the model's answer (a field name it invented), which may hold U+0000.
    row = conn.execute(
        queries.SUBMIT_JUDGE_RUN, {"outcome": Jsonb(without_nul(outcome))}
    ).fetchone()
    stored: dict[str, Any] = row[0] if row else {}
    return GroupResult(
        group=group,
        status=str(stored.get("status")),
        detail=str(stored.get("error") or ""),
        judge_run_id=stored.get("judge_run_id"),
        pairs=int(stored.get("pairs") or 0),
    )


def run_semantic(
    conn: psycopg.Connection[Any],
    since: datetime | None,
    until: datetime | None,
    *,
    dry_run: bool,
    client_factory: Callable[[], AsyncAnthropic],
) -> list[GroupResult]:
    """Judge every group of the window (conn in autocommit: each group commits on its own).

    A dry run builds every request and returns it, calling no model and storing nothing.
    """
    groups = load_groups(conn, since, until)
    results: list[GroupResult] = []
    client: AsyncAnthropic | None = None
    with asyncio.Runner() as runner:
        for group in groups:
            if group.skipped:
                results.append(GroupResult(group=group, status="skipped", detail=group.skipped))
            elif dry_run:
                request = build_request(group)
                results.append(GroupResult(group=group, status="dry-run", request=request))
            else:
                client = client or client_factory()
                results.append(judge_group(conn, client, runner, group, since, until))
        if client is not None:
            runner.run(client.close())
    return results


def describe(results: Iterable[GroupResult]) -> str:
    """One line per group (and, for a dry run, the request that would be sent)."""
    out: list[str] = []
    for r in results:
        g = r.group
        head = (
            f"group {g.label}: {len(g.proposals)} proposals, {len(g.facts)} facts, "
            f"model {g.model or '-'}: {r.status}"
        )
        if r.status in ("completed",):
            head += f", {r.pairs} pairs (judge run {r.judge_run_id})"
        if r.detail:
            head += f": {r.detail}"
        out.append(head)
        if r.request is not None:
            out.append(json.dumps(r.request, ensure_ascii=False, indent=2))
    if not out:
        out.append("nothing to judge in this window")
    return "\n".join(out)
