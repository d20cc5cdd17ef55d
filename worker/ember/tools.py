"""The pydantic models behind every tool schema: each model is both the `input_schema` sent to the
model and the validation of what the model answers. One section per tool family."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

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
