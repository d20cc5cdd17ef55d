"""The prompts name exactly the evidence kinds the database accepts, and the shadow tool."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ["shadow_question.md", "cold_reader.md"]


@pytest.mark.parametrize("name", PROMPTS)
def test_prompt_kinds_match_the_evidence_rule(db: str, name: str) -> None:
    text = (ROOT / "prompts" / name).read_text()
    named = set(re.findall(r"^- `([a-z-]+)`:", text, re.M))
    with psycopg.connect(db) as conn:
        row = conn.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = %s",
            ("valid_rows_are_complete",),
        ).fetchone()
    assert row is not None
    accepted = set(re.findall(r"'([a-z]+-[a-z]+)'", row[0]))
    assert named == accepted
    assert "`shadow_memory_propose`" in text
