"""The answer model's and the judge's requests, and what their replies are taken to mean.

Every text in a request comes from somewhere untrusted: facts were written by a model from what
people said, questions and gold answers come from the benchmark file, the answer to judge from
the answer model. Each is sent as one JSON string on its own labelled line (`quoted`), so no text
can end its line, start a line that passes for another fact, or close its quotes; the prompts
say that these strings are data.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anthropic
from pydantic import BaseModel, ValidationError

from ember.textversion import text_version
from ember.tokens import estimate_tokens
from ember.tools import (
    EVAL_ANSWER_TOOL,
    EVAL_JUDGE_TOOL,
    EvalAnswer,
    EvalVerdict,
    eval_answer_tool,
    eval_judge_tool,
)

PROMPTS = Path(__file__).resolve().parents[3] / "prompts"
ANSWER_MAX_TOKENS = 1024
JUDGE_MAX_TOKENS = 1024
# The simulator names its responder on every answer; Anthropic never sends this header.
SIM_HEADER = "x-ember-sim-responder"

# Beyond what json.dumps escapes (C0 controls, quotes, backslashes): DEL, C1 controls and the
# Unicode line and paragraph separators, which some readers break a line at.
_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029]")


def quoted(text: str) -> str:
    """`text` as one JSON string literal that no reader breaks across lines."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(text, ensure_ascii=False))


@dataclass(frozen=True)
class Shown:
    """One memory item shown to the answer model (ember.eval_shown)."""

    rank: int
    fact_id: int | None
    proposal_id: int | None
    text: str
    stated_at: datetime | None
    score: float | None = None


def context_text(shown: Sequence[Shown]) -> str:
    if not shown:
        return "Memory: no fact matched the question."
    lines = [f"Memory: {len(shown)} facts, most relevant first."]
    for item in shown:
        when = item.stated_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M") if item.stated_at else "?"
        lines.append(f"F{item.rank} ({when}): {quoted(item.text)}")
    return "\n".join(lines)


def context_tokens(shown: Sequence[Shown]) -> int:
    """The memory part of the answer request, by Ember's token estimate (ember.tokens)."""
    return estimate_tokens(context_text(shown)) if shown else 0


def answer_request(
    model: str, question: str, question_date: str | None, shown: Sequence[Shown]
) -> dict[str, Any]:
    parts = []
    if question_date:
        parts.append(f"Question date: {quoted(question_date)}")
    parts += [context_text(shown), f"Question: {quoted(question)}"]
    return {
        "model": model,
        "max_tokens": ANSWER_MAX_TOKENS,
        "system": (PROMPTS / "eval_answer.md").read_text(encoding="utf-8"),
        "messages": [{"role": "user", "content": "\n\n".join(parts)}],
        "tools": [eval_answer_tool()],
        "tool_choice": {"type": "tool", "name": EVAL_ANSWER_TOOL},
    }


def judge_request(model: str, question: str, gold: str, answer: str) -> dict[str, Any]:
    content = "\n".join(
        [
            f"Question: {quoted(question)}",
            f"Gold answer: {quoted(gold)}",
            f"Answer to judge: {quoted(answer)}",
        ]
    )
    return {
        "model": model,
        "max_tokens": JUDGE_MAX_TOKENS,
        "system": (PROMPTS / "eval_judge.md").read_text(encoding="utf-8"),
        "messages": [{"role": "user", "content": content}],
        "tools": [eval_judge_tool()],
        "tool_choice": {"type": "tool", "name": EVAL_JUDGE_TOOL},
    }


class ReplyError(ValueError):
    """A reply that does not fit its tool: the call counts as failed, with this reason."""


def tool_input(message: Any, tool: str, model: type[BaseModel]) -> Any:
    calls = [b for b in message.content if b.type == "tool_use" and b.name == tool]
    if len(calls) != 1:
        raise ReplyError(f"expected one {tool} call, got {len(calls)}")
    try:
        return model.model_validate(calls[0].input)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "input"
        raise ReplyError(f"reply does not fit {tool}: {where}: {first['msg']}") from None


def parse_answer(message: Any, shown: int) -> EvalAnswer:
    """The answer and the facts it cites; a fact number beyond those shown fails the reply,
    as an out-of-range pair fails a semantic judge run: a made-up citation is worse than none."""
    reply: EvalAnswer = tool_input(message, EVAL_ANSWER_TOOL, EvalAnswer)
    beyond = sorted({n for n in reply.facts if n > shown})
    if beyond:
        raise ReplyError(
            f"the answer cites F{beyond[0]}, but {shown} fact(s) were shown"
            if shown
            else f"the answer cites F{beyond[0]}, but no fact was shown"
        )
    return reply


def parse_verdict(message: Any) -> EvalVerdict:
    verdict: EvalVerdict = tool_input(message, EVAL_JUDGE_TOOL, EvalVerdict)
    return verdict


def usage_of(message: Any) -> dict[str, int]:
    u = message.usage
    created = getattr(u, "cache_creation", None)
    return {
        "input_tokens": u.input_tokens or 0,
        "cache_read_input_tokens": u.cache_read_input_tokens or 0,
        "cache_creation_5m_input_tokens": (created.ephemeral_5m_input_tokens or 0)
        if created
        else 0,
        "cache_creation_1h_input_tokens": (created.ephemeral_1h_input_tokens or 0)
        if created
        else 0,
        "output_tokens": u.output_tokens or 0,
    }


@dataclass
class Call:
    """One model call as ember.eval_record_call stores it."""

    purpose: str
    model: str
    started_at: datetime
    finished_at: datetime
    latency_ms: int
    simulated: bool = False
    usage: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    message: Any = None
    prompt_sha256: str | None = None  # the text_version of the request's system prompt

    def record(self, question_id: str, pipeline: str) -> dict[str, Any]:
        return {
            "question_id": question_id,
            "pipeline": pipeline,
            "purpose": self.purpose,
            "model": self.model,
            "status": "failed" if self.error else "completed",
            "error": self.error,
            "simulated": self.simulated,
            "usage": self.usage,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat(),
            "latency_ms": self.latency_ms,
            "prompt_sha256": self.prompt_sha256,
        }


def call(client: anthropic.Anthropic, purpose: str, request: dict[str, Any]) -> Call:
    """One Messages call; an API error is the call's error, never an exception."""
    started = datetime.now(UTC)
    clock = time.monotonic()
    out = Call(purpose, str(request["model"]), started, started, 0)
    out.prompt_sha256 = text_version(str(request["system"]))
    try:
        raw = client.messages.with_raw_response.create(**request)
        out.simulated = raw.headers.get(SIM_HEADER) is not None
        out.message = raw.parse()
        out.usage = usage_of(out.message)
    except anthropic.APIError as exc:
        out.error = f"model call failed: {type(exc).__name__}: {exc}"
    out.finished_at = datetime.now(UTC)
    out.latency_ms = int((time.monotonic() - clock) * 1000)
    return out
