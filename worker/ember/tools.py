"""The pydantic models behind every tool schema: each model is both the `input_schema` sent to the
model and the validation of what the model answers. One section per tool family."""

from __future__ import annotations

import copy
import functools
import json
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# --- semantic judge (comparison) ---

SEMANTIC_JUDGE_TOOL = "semantic_judge_pairs"


class JudgedPair(BaseModel):
    """One proposal and one fact that state the same thing."""

    model_config = ConfigDict(extra="forbid")

    proposal: int = Field(ge=0, description="index of the proposal in the P list (P0 is 0)")
    fact: int = Field(ge=0, description="index of the fact in the F list (F0 is 0)")


class SemanticJudgement(BaseModel):
    """The judge's answer: every equivalent pair, and nothing else."""

    model_config = ConfigDict(extra="forbid")

    pairs: list[JudgedPair] = Field(
        description="pairs of a proposal and a fact that say the same thing; empty when none do"
    )


def semantic_judge_tool() -> dict[str, Any]:
    """The tool definition offered to the judge; its schema comes from `SemanticJudgement`."""
    return {
        "name": SEMANTIC_JUDGE_TOOL,
        "description": (
            "Report which shadow proposals (P) and steward facts (F) state the same fact. "
            "Use only indexes shown in the lists."
        ),
        "input_schema": SemanticJudgement.model_json_schema(),
    }


# --- shadow (issue 9) ---

SHADOW_TOOL_NAME = "shadow_memory_propose"

EvidenceKind = Literal["user-stated", "user-accepted", "tool-verified", "observed-outcome"]


class MessagePointer(BaseModel):
    """One message of this conversation, by its id (the `m:<id>` of a rendered row)."""

    model_config = ConfigDict(extra="forbid")
    message_id: Annotated[int, Field(gt=0, description="the id after `m:` in a rendered row")]


class GenerationPointer(BaseModel):
    """A whole context of this conversation, by its generation id."""

    model_config = ConfigDict(extra="forbid")
    generation_id: Annotated[UUID, Field(description="a generation id of this conversation")]


class ShadowFact(BaseModel):
    """One fact worth remembering, with the rows that justify it."""

    model_config = ConfigDict(extra="forbid")
    text: Annotated[
        str, Field(min_length=1, description="the fact, as one self-contained sentence")
    ]
    evidence_kind: Annotated[
        EvidenceKind, Field(description="what kind of support the evidence gives")
    ]
    evidence: Annotated[
        list[MessagePointer | GenerationPointer],
        Field(min_length=1, description="exactly one of message_id or generation_id per item"),
    ]


class ShadowMemoryPropose(BaseModel):
    """Propose the facts from this conversation that are worth remembering."""

    model_config = ConfigDict(extra="forbid")
    facts: Annotated[list[ShadowFact], Field(description="every fact, each with its evidence")]


SHADOW_TOOL_DESCRIPTION = (
    "Propose facts worth remembering from this conversation, each with evidence that points at "
    "its messages. Only for shadow turns run by the memory system."
)


@functools.cache
def _shadow_input_schema() -> dict[str, Any]:
    # pydantic builds a schema afresh on every call, about a millisecond: once per process.
    return ShadowMemoryPropose.model_json_schema()


def shadow_tool_definition() -> dict[str, Any]:
    """The tool definition hosts include in every turn's tools, from the first turn on.

    Generated once per process and then fixed: the prompt cache keys on the exact bytes of the
    tools, so the definition must not change between a thread's turns. Each caller gets its
    own copy, free to change.
    """
    return {
        "name": SHADOW_TOOL_NAME,
        "description": SHADOW_TOOL_DESCRIPTION,
        "input_schema": copy.deepcopy(_shadow_input_schema()),
    }


class ToolInputError(Exception):
    """The tool input is not even a list of facts: nothing in it can be kept as a proposal."""


def parse_shadow_proposals(tool_input: Any) -> list[Any]:
    """The proposals of one `shadow_memory_propose` call, each ready for `submit_shadow_run`.

    A fact that parses is sent in its normalized form; one that does not is sent as the model
    wrote it, so SQL stores it with its validation error as comparison data (a model's mistakes
    are part of what the comparison measures). Only an input that is not an object with a list
    of facts is refused whole.
    """
    if not isinstance(tool_input, dict) or not isinstance(tool_input.get("facts"), list):
        raise ToolInputError("shadow_memory_propose input has no list of facts")
    extra = sorted(k for k in tool_input if k != "facts")
    if extra:
        raise ToolInputError(f"shadow_memory_propose input has unknown fields: {', '.join(extra)}")
    proposals: list[Any] = []
    for raw in tool_input["facts"]:
        try:
            fact = ShadowFact.model_validate(raw)
        except ValidationError:
            proposals.append(raw)
            continue
        proposals.append(fact.model_dump(mode="json"))
    return proposals


# --- steward (issue 10) ---
#
# The memory steward's five tools. Strict models (no coercion, no extra keys): a call they accept
# is one the SQL tools (functions/052_steward_tools.sql) accept by shape too, and a call they
# refuse is answered with their reason instead of being applied.

Evidence = Annotated[
    list[MessagePointer | GenerationPointer],
    Field(
        min_length=1,
        description=(
            'the rows that justify the fact: {"message_id": n} for a row shown as m:n, or '
            '{"generation_id": "..."} for a whole generation named in a page header'
        ),
    ),
]


class WriteFact(BaseModel):
    """Write one new fact worth keeping, with the evidence that justifies it."""

    model_config = ConfigDict(extra="forbid", strict=True)
    text: Annotated[
        str, Field(min_length=1, description="the fact, as one self-contained sentence")
    ]
    evidence_kind: Annotated[
        EvidenceKind, Field(description="what kind of support the evidence gives")
    ]
    evidence: Evidence


class MergeFacts(BaseModel):
    """Replace two or more facts that say the same thing (or one refines another) by one fact."""

    model_config = ConfigDict(extra="forbid", strict=True)
    fact_ids: Annotated[
        list[Annotated[int, Field(gt=0)]],
        Field(min_length=2, description="the ids of the active facts this one replaces"),
    ]
    text: Annotated[str, Field(min_length=1, description="the merged fact, one sentence")]
    evidence_kind: EvidenceKind
    evidence: Evidence


class RetireFact(BaseModel):
    """Retire a fact that is no longer true, keeping the reason."""

    model_config = ConfigDict(extra="forbid", strict=True)
    fact_id: Annotated[int, Field(gt=0, description="the id of an active fact")]
    reason: Annotated[
        str, Field(min_length=1, description="why it no longer holds, citing what changed")
    ]


class SearchMemory(BaseModel):
    """Find facts already in memory, by meaning and by words, before writing a new one."""

    model_config = ConfigDict(extra="forbid", strict=True)
    query: Annotated[str, Field(min_length=1, description="what to look for, in plain words")]
    limit: Annotated[int | None, Field(default=None, gt=0, le=50)] = None


class Finish(BaseModel):
    """End this wake: mark every row up to and including this one as digested."""

    model_config = ConfigDict(extra="forbid", strict=True)
    through_message_id: Annotated[
        int, Field(gt=0, description="the id of the last row digested (m:<id>), usually the last")
    ]


STEWARD_TOOLS: dict[str, type[BaseModel]] = {
    "write_fact": WriteFact,
    "merge_facts": MergeFacts,
    "retire_fact": RetireFact,
    "search_memory": SearchMemory,
    "finish": Finish,
}


def steward_tool_definitions() -> list[dict[str, Any]]:
    """The steward's tools, and only those, in a fixed order (the prompt cache keys on them)."""
    return [
        {
            "name": name,
            "description": (model.__doc__ or "").strip(),
            "input_schema": model.model_json_schema(),
        }
        for name, model in STEWARD_TOOLS.items()
    ]


def steward_call_error(name: str, tool_input: Any) -> str | None:
    """Why a steward tool call is refused by its model, or None when it parses."""
    model = STEWARD_TOOLS.get(name)
    if model is None:
        return f'unknown tool "{name}"; the tools are {", ".join(STEWARD_TOOLS)}'
    try:
        # JSON mode: the input came from JSON, so a uuid string is a uuid, a "12" is not an int.
        model.model_validate_json(json.dumps(tool_input))
    except ValidationError as exc:
        return "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'input'}: {err['msg']}"
            for err in exc.errors(include_url=False)
        )
    return None


# --- ember eval (issue 28) ---
#
# The answer model's and the judge's tools. Facts are named by their number in the prompt (F3 is
# 3), never by a database id: the model sees no ids, so it cannot make one up.

EVAL_ANSWER_TOOL = "answer_question"
EVAL_JUDGE_TOOL = "judge_answer"


class EvalAnswer(BaseModel):
    """Answer the question from the memory shown, naming the facts the answer rests on."""

    model_config = ConfigDict(extra="forbid")
    answer: Annotated[
        str,
        Field(
            min_length=1,
            description="the answer, short and complete; say that memory does not say when it "
            "does not",
        ),
    ]
    facts: Annotated[
        list[Annotated[int, Field(ge=1)]],
        Field(description="the numbers of the facts the answer uses (F3 is 3); empty if none"),
    ]


class EvalVerdict(BaseModel):
    """The verdict on one answer against the gold answer, and why."""

    model_config = ConfigDict(extra="forbid")
    verdict: Annotated[
        Literal["correct", "wrong"],
        Field(
            description="correct only if the answer states the gold answer; anything else is wrong"
        ),
    ]
    reason: Annotated[
        str, Field(min_length=1, description="one or two sentences: what matches or what is off")
    ]


def eval_answer_tool() -> dict[str, Any]:
    return {
        "name": EVAL_ANSWER_TOOL,
        "description": (EvalAnswer.__doc__ or "").strip(),
        "input_schema": EvalAnswer.model_json_schema(),
    }


def eval_judge_tool() -> dict[str, Any]:
    return {
        "name": EVAL_JUDGE_TOOL,
        "description": (EvalVerdict.__doc__ or "").strip(),
        "input_schema": EvalVerdict.model_json_schema(),
    }


# --- consolidation (issue 25) ---
# One tool, forced: the model lists its actions on the facts it was shown, by their ids. The
# database checks each action again (functions/101_consolidation_submit.sql); this only refuses
# what is not an action at all.

CONSOLIDATION_TOOL = "consolidate_facts"


# The default of the setting max_fact_chars (db/migrations/0042_output_bounds.sql).
FACT_TEXT_BOUND = 2000


class ConsolidationAction(BaseModel):
    """One action on the facts shown."""

    model_config = ConfigDict(extra="forbid")
    action: Literal["merge", "supersede", "retire", "flag"]
    fact_ids: Annotated[
        list[Annotated[int, Field(ge=1)]],
        Field(
            min_length=1,
            description="merge: the facts to merge; supersede: [older, newer]; retire: [fact]; "
            "flag: the facts in doubt",
        ),
    ]
    # The bounds are told to the model in the schema and enforced per action in SQL
    # (consolidation_action_error, setting max_fact_chars): one over-long action is refused
    # with its reason while its siblings are applied, where a refusal here would fail the run.
    text: Annotated[
        str | None,
        Field(
            default=None,
            description="merge only: the merged fact's text",
            json_schema_extra={"maxLength": FACT_TEXT_BOUND},
        ),
    ] = None
    reason: Annotated[
        str,
        Field(
            min_length=1,
            description="why, in one sentence",
            json_schema_extra={"maxLength": FACT_TEXT_BOUND},
        ),
    ]
    confidence: Annotated[float, Field(ge=0, le=1, description="how sure, from 0 to 1")]


class Consolidation(BaseModel):
    """The actions to take on the facts shown; an empty list when nothing needs doing."""

    model_config = ConfigDict(extra="forbid")
    actions: list[ConsolidationAction]


def consolidation_tool() -> dict[str, Any]:
    return {
        "name": CONSOLIDATION_TOOL,
        "description": (Consolidation.__doc__ or "").strip(),
        "input_schema": Consolidation.model_json_schema(),
    }


def parse_consolidation(tool_input: Any) -> list[dict[str, Any]]:
    """The actions of one tool call, validated; ToolInputError when the input is not the tool's."""
    try:
        parsed = Consolidation.model_validate(tool_input)
    except ValidationError as exc:
        raise ToolInputError(f"consolidate_facts input refused: {exc.errors()[0]['msg']}") from exc
    return [a.model_dump(exclude_none=True) for a in parsed.actions]
