"""What a run will cost, before any call: token counts estimated here from the file, priced in
SQL (ember.eval_estimate) from the models' list-price snapshots, as every cost in Ember is.

The counts follow how the pipelines read, with round numbers that err high (docs/eval.md):

- a row is its text plus the rendered head (`m:<id> user(human): `), by Ember's token estimate;
- the steward reads a conversation in wakes of at most 4 sessions and about 80,000 tokens, and
  resends what it read in each of about three rounds (search, write, finish), with its prompt;
  it writes about a fifth of what it reads (fact texts, search queries, evidence);
- shadow's cold path reads each session once, in pages of 12,000 tokens, each with its prompt,
  and writes about a tenth of what it reads (an eval imports history: no prefix is recorded, so
  no hot path);
- each asked question is answered and judged once per pipeline: the prompt, the question and
  top-k facts of about 40 tokens; answers of about 150 tokens, verdicts of about 120.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ember import queries
from ember.evaluation.formats import Conversation, Question
from ember.tokens import estimate_tokens

PROMPTS = Path(__file__).resolve().parents[3] / "prompts"
ROW_HEAD_TOKENS = 8
TOOLS_TOKENS = 700  # the tool definitions sent with each request
STEWARD_WAKE_SESSIONS = 4
STEWARD_WAKE_TOKENS = 80_000
STEWARD_ROUNDS = 3
STEWARD_WRITES = 0.2
COLD_PAGE_TOKENS = 12_000
COLD_WRITES = 0.1
FACT_TOKENS = 40
ANSWER_TOKENS = 150
VERDICT_TOKENS = 120


def _prompt(name: str) -> int:
    return estimate_tokens((PROMPTS / name).read_text(encoding="utf-8")) + TOOLS_TOKENS


@dataclass
class Role:
    role: str
    model: str | None
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def item(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "model": self.model,
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }


def items(
    conversations: Sequence[Conversation],
    asked: Sequence[Question],
    top_k: int,
    answer_model: str | None,
    judge_model: str | None,
) -> list[dict[str, Any]]:
    steward, shadow = Role("steward", None), Role("shadow", None)
    steward_prompt, cold_prompt = _prompt("steward.md"), _prompt("cold_reader.md")
    for conv in conversations:
        wake_sessions = wake_tokens = 0
        wakes: list[int] = []
        for session in conv.sessions:
            tokens = sum(estimate_tokens(t.content) + ROW_HEAD_TOKENS for t in session.turns)
            pages = max(1, math.ceil(tokens / COLD_PAGE_TOKENS))
            shadow.calls += pages
            shadow.input_tokens += tokens + pages * cold_prompt
            shadow.output_tokens += int(tokens * COLD_WRITES) + 200 * pages
            if wake_sessions and (
                wake_sessions == STEWARD_WAKE_SESSIONS or wake_tokens + tokens > STEWARD_WAKE_TOKENS
            ):
                wakes.append(wake_tokens)
                wake_sessions = wake_tokens = 0
            wake_sessions += 1
            wake_tokens += tokens
        wakes.append(wake_tokens)
        for read in wakes:
            steward.calls += STEWARD_ROUNDS
            steward.input_tokens += STEWARD_ROUNDS * (read + steward_prompt)
            steward.output_tokens += int(read * STEWARD_WRITES) + 200
    answer, judge = Role("answer", answer_model), Role("judge", judge_model)
    answer_prompt, judge_prompt = _prompt("eval_answer.md"), _prompt("eval_judge.md")
    for q in asked:
        question = estimate_tokens(q.question) + estimate_tokens(q.question_date or "")
        # Each question is answered and judged once per pipeline.
        answer.calls += 2
        answer.input_tokens += 2 * (answer_prompt + question + top_k * FACT_TOKENS)
        answer.output_tokens += 2 * ANSWER_TOKENS
        judge.calls += 2
        judge.input_tokens += 2 * (
            judge_prompt + question + estimate_tokens(q.gold) + ANSWER_TOKENS
        )
        judge.output_tokens += 2 * VERDICT_TOKENS
    return [r.item() for r in (steward, shadow, answer, judge)]


@dataclass
class Estimate:
    rows: list[tuple[str, str, int, int, int, Decimal | None]]

    @property
    def total(self) -> Decimal | None:
        """USD in all, or None when a model of the run has no price."""
        if any(r[5] is None for r in self.rows):
            return None
        return sum((r[5] for r in self.rows if r[5] is not None), Decimal(0))

    def lines(self) -> list[str]:
        out = ["cost estimate (list prices, every input token uncached; docs/eval.md says how):"]
        for role, model, calls, tin, tout, usd in self.rows:
            price = f"${usd:.4f}" if usd is not None else "unknown (no price)"
            out.append(
                f"  {role:<8} {model:<20} {calls:>7,} calls {tin:>13,} in {tout:>11,} out  {price}"
            )
        total = self.total
        out.append(f"  total    {'$' + format(total, '.4f') if total is not None else 'unknown'}")
        return out


def priced(conn: psycopg.Connection[Any], plan: list[dict[str, Any]]) -> Estimate:
    rows = conn.execute(queries.EVAL_ESTIMATE, {"plan": Jsonb(plan)}).fetchall()
    return Estimate([(str(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4]), r[5]) for r in rows])
