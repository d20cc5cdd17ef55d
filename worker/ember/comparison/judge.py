"""Semantic judging: which shadow proposals and steward facts say the same thing.

The flow is the worker's: SQL decides the candidates (isolated threads are removed there, before
any prompt exists) and routes each label-category group to a light model tagged for exactly its
categories; Python builds the prompt, calls the model, validates the answer with the pydantic
model of the tool, and hands it to `ember.submit_judge_run`, which stores it or fails the group.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anthropic
import psycopg
from psycopg.types.json import Jsonb
from pydantic import ValidationError

from ember import queries
from ember.tools import SEMANTIC_JUDGE_TOOL, SemanticJudgement, semantic_judge_tool
from ember.worker.calls import without_nul

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


def load_groups(
    conn: psycopg.Connection[Any], since: datetime | None, until: datetime | None
) -> list[Group]:
    """Candidates grouped by their label-category set, each routed or marked skipped."""
    groups: dict[tuple[str, ...], Group] = {}
    for side, item_id, thread_id, text, categories in conn.execute(
        queries.SEMANTIC_CANDIDATES, (since, until)
    ):
        key = tuple(categories)
        group = groups.setdefault(key, Group(categories=key))
        item = Item(side, item_id, thread_id, text)
        (group.proposals if side == "proposal" else group.facts).append(item)

    for group in groups.values():
        if not group.proposals or not group.facts:
            side = "proposals" if group.proposals else "facts"
            group.skipped = f"only {side}: nothing to compare, no model called"
            continue
        try:
            row = conn.execute(queries.ROUTE_LIGHT_MODEL, (list(group.categories),)).fetchone()
        except psycopg.Error as exc:
            # No light model is tagged for these categories: the group waits, as routing says.
            group.skipped = f"not routed: {exc.diag.message_primary or exc}"
            continue
        group.model = row[0] if row else None
        shortlist = conn.execute(
            queries.SEMANTIC_SHORTLIST,
            ([p.item_id for p in group.proposals], [f.item_id for f in group.facts], SHORTLIST_K),
        ).fetchone()
        keep = set(shortlist[0]) if shortlist else set()
        group.facts = [f for f in group.facts if f.item_id in keep]
    return [groups[k] for k in sorted(groups)]


# What ember.render_escape (functions/035_render.sql) writes as \uXXXX: every control or separator
# character some reader might break a line at, but tab, line feed and carriage return.
_BREAKS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def line_text(text: str) -> str:
    """`text` on one line, escaped exactly as ember.render_escape escapes a rendered row.

    Proposal and fact texts are written by models from what users and tools wrote: unescaped, a
    line break in one could start a line that passes for another item and its index.
    """
    out = text.replace("\\", "\\\\").replace("\r\n", "\\n").replace("\n", "\\n")
    out = out.replace("\r", "\\r")
    return _BREAKS.sub(lambda m: f"\\u{ord(m.group()):04x}", out)


def build_request(group: Group) -> dict[str, Any]:
    """The Messages API request for one group: indexes and texts only, no ids of any kind."""
    assert group.model is not None
    lines = ["Proposals:"]
    lines += [f"P{i}: {line_text(p.text)}" for i, p in enumerate(group.proposals)]
    lines += ["", "Facts:"]
    lines += [f"F{i}: {line_text(f.text)}" for i, f in enumerate(group.facts)]
    return {
        "model": group.model,
        "max_tokens": MAX_TOKENS,
        "system": _prompt_text(),
        "messages": [{"role": "user", "content": "\n".join(lines)}],
        "tools": [semantic_judge_tool()],
        "tool_choice": {"type": "tool", "name": SEMANTIC_JUDGE_TOOL},
    }


def _usage(message: Any) -> dict[str, int]:
    u = message.usage
    created = u.cache_creation
    w5 = (created.ephemeral_5m_input_tokens or 0) if created else 0
    w1 = (created.ephemeral_1h_input_tokens or 0) if created else 0
    return {
        "input_tokens": u.input_tokens or 0,
        "cache_read_input_tokens": u.cache_read_input_tokens or 0,
        "cache_creation_5m_input_tokens": w5,
        "cache_creation_1h_input_tokens": w1,
        "output_tokens": u.output_tokens or 0,
    }


def _pairs_from(message: Any) -> list[list[int]]:
    """The judge's pairs, or ValueError with the reason the reply is unusable."""
    calls = [b for b in message.content if b.type == "tool_use" and b.name == SEMANTIC_JUDGE_TOOL]
    if len(calls) != 1:
        raise ValueError(f"expected one {SEMANTIC_JUDGE_TOOL} call, got {len(calls)}")
    try:
        judgement = SemanticJudgement.model_validate(calls[0].input)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"reply does not fit the tool schema: {where}: {first['msg']}") from None
    return [[p.proposal, p.fact] for p in judgement.pairs]


def judge_group(
    conn: psycopg.Connection[Any],
    client: anthropic.Anthropic,
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
    try:
        message = client.messages.create(**request)
        usage = _usage(message)
        pairs = _pairs_from(message)
    except anthropic.APIError as exc:
        error = f"model call failed: {type(exc).__name__}: {exc}"
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
    }
    # The error may quote the model's answer (a field name it invented), which may hold U+0000.
    row = conn.execute(queries.SUBMIT_JUDGE_RUN, (Jsonb(without_nul(outcome)),)).fetchone()
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
    client_factory: Callable[[], anthropic.Anthropic],
) -> list[GroupResult]:
    """Judge every group of the window (conn in autocommit: each group commits on its own).

    A dry run builds every request and returns it, calling no model and storing nothing.
    """
    groups = load_groups(conn, since, until)
    results: list[GroupResult] = []
    client: anthropic.Anthropic | None = None
    for group in groups:
        if group.skipped:
            results.append(GroupResult(group=group, status="skipped", detail=group.skipped))
        elif dry_run:
            results.append(GroupResult(group=group, status="dry-run", request=build_request(group)))
        else:
            client = client or client_factory()
            results.append(judge_group(conn, client, group, since, until))
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
