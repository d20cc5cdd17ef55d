"""prompts/main.md does not drift: the tools it names exist, and its theses are still there."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
MAIN_MD = ROOT / "prompts" / "main.md"

# The role of seed 001 section 4, thesis by thesis.
THESES = [
    "Read progress reports, not transcripts",
    "Judge completion by the scene, not by the report",
    "Tell an idle stop from a real block",
    "Re-rank priorities on each wake by the current state",
    "Speak briefly to the person",
    # A position, not a persona; and main's words are never the person's.
    "This is a position, not a different character",
    "the person wins",
]


def _named_tools() -> set[str]:
    return set(re.findall(r"`([^`]+)`", MAIN_MD.read_text()))


def test_every_tool_named_in_main_md_is_registered(db: str) -> None:
    with psycopg.connect(db) as conn:
        registry = {r[0] for r in conn.execute("SELECT name FROM ember.tools")}
    named = _named_tools()
    assert named - registry == set(), f"main.md names tools the registry lacks: {named - registry}"
    assert len(named) > 8, f"main.md names only {len(named)} tools"


def test_main_md_names_main_s_own_tools(db: str) -> None:
    with psycopg.connect(db) as conn:
        own = {r[0] for r in conn.execute("SELECT name FROM ember.tools WHERE kinds = '{main}'")}
    assert own == {"progress_board", "watch_thread", "side_chat_message", "side_chat_inspect"}
    assert own <= _named_tools()


def test_main_md_keeps_its_theses() -> None:
    text = " ".join(MAIN_MD.read_text().split())
    missing = [t for t in THESES if t not in text]
    assert not missing, f"main.md lost: {missing}"


def test_the_built_in_role_keeps_the_first_theses(db: str) -> None:
    with psycopg.connect(db) as conn:
        row = conn.execute(
            "SELECT builtin FROM ember.identity_documents WHERE file = 'prompts/main.md'"
        ).fetchone()
    assert row is not None
    assert "Read their progress reports, not their transcripts" in row[0]
    assert "not by the report" in row[0]
