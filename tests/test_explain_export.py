"""`ember explain FACT_ID` on a terminal and `ember export --facts` written and read back."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ember import cli
from ember.export_facts import FactsFileError, export_facts_to, format_record, read_facts
from forgetkit import append, insert_fact

MARKER = "hushword-5523"
FACT_KEYS = ("pet", "tea", "friday", "merged")


def _world(url: str) -> dict[str, Any]:
    """One thread with a statement, a conclusion and its acceptance, a tool result; four facts,
    two merged into a third; then the statement forgotten."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT ember.create_thread('default', 's1', 'side', 'Topic')")
        said = append(conn, "s1", "user", f"My pet's name is {MARKER}.")
        tea = append(conn, "s1", "user", "I drink tea.")
        concl = append(conn, "s1", "assistant", "We will deploy on Fridays.")
        accept = append(conn, "s1", "user", "Agreed, Fridays.")
        ids = {
            "pet": insert_fact(conn, f"Pet is called {MARKER}", "user-stated", [said]),
            "tea": insert_fact(conn, "Drinks tea", "user-stated", [tea, said]),
            "friday": insert_fact(conn, "Deploys on Fridays", "user-accepted", [concl, accept]),
        }
        ids["merged"] = insert_fact(conn, "Drinks tea and deploys Fridays", "user-stated", [tea])
        conn.execute(
            "UPDATE ember.facts SET status = 'merged', merged_into = %s WHERE id IN (%s, %s)",
            (ids["merged"], ids["tea"], ids["friday"]),
        )
        conn.execute(
            "SELECT ember.forget_messages('default', ARRAY[%s]::bigint[], 'asked')", (said,)
        )
        ids.update(said=said, tea_row=tea, concl=concl, accept=accept)
        return ids


def test_ember_explain_prints_evidence_acceptance_merges_and_history(
    db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _world(db)
    monkeypatch.setenv("DATABASE_URL", db)

    assert cli.main(["explain", str(ids["friday"])]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"fact {ids['friday']} [user-accepted] merged into fact {ids['merged']}"
    assert lines[1] == "  Deploys on Fridays"
    assert any(f"m:{ids['concl']} in s1, assistant(agent)" in line for line in lines)
    assert any("We will deploy on Fridays." in line for line in lines), "rows are rendered"
    assert f"acceptance: conclusion m:{ids['concl']} accepted by m:{ids['accept']}" in out
    assert "written -> active" in out and f"merged -> merged into fact {ids['merged']}" in out

    assert cli.main(["explain", str(ids["merged"])]) == 0
    out = capsys.readouterr().out
    assert "merged from:" in out
    assert f"fact {ids['tea']} (merged): Drinks tea" in out

    # The forgotten fact: its text is gone, and the history says why.
    assert cli.main(["explain", str(ids["pet"])]) == 0
    out = capsys.readouterr().out
    assert MARKER not in out
    assert "(text forgotten)" in out
    assert "forgotten -> retired (source-forgotten)" in out
    assert "by forget #1: asked" in out
    assert "(no pointers left)" in out

    # The kept fact lost one pointer, and says which.
    assert cli.main(["explain", str(ids["tea"])]) == 0
    out = capsys.readouterr().out
    assert f"evidence-shrunk -> merged into fact {ids['merged']} removed m:{ids['said']}" in out

    assert cli.main(["explain", "987654"]) == cli.EXIT_NOT_FOUND
    assert "no such fact: 987654" in capsys.readouterr().err


def test_export_facts_round_trip(db: str) -> None:
    ids = _world(db)
    out = io.StringIO()
    with psycopg.connect(db) as conn:
        assert export_facts_to(conn, out) == 4
        db_rows = conn.execute(
            "SELECT id, text, status, evidence_kind, merged_into FROM ember.facts ORDER BY id"
        ).fetchall()
        pointers = conn.execute(
            "SELECT fact_id, array_agg(message_id ORDER BY ordinal) FROM ember.fact_evidence "
            "GROUP BY fact_id"
        ).fetchall()
        history = conn.execute(
            "SELECT fact_id, array_agg(change ORDER BY at, id) FROM ember.fact_history "
            "GROUP BY fact_id"
        ).fetchall()

    text = out.getvalue()
    assert text.splitlines()[0] == '{"format":"ember-facts","version":1}'
    assert MARKER not in text, "the export never holds erased text"

    records = read_facts(io.StringIO(text))
    fields = ("id", "text", "status", "evidence_kind", "merged_into")
    assert [tuple(r[k] for k in fields) for r in records] == [tuple(row) for row in db_rows]
    by_id = {r["id"]: r for r in records}
    assert {f: [p["message_id"] for p in by_id[f]["evidence"]] for f, _ in pointers} == dict(
        pointers
    )
    assert {f: [h["change"] for h in by_id[f]["history"]] for f, _ in history} == dict(history)
    # Pointers are portable: thread, generation ordinal and position in it.
    tea = by_id[ids["tea"]]["evidence"][0]
    assert (tea["thread"], tea["generation"], tea["position"]) == ("s1", 1, 2)
    # A forgotten fact keeps its record and why it went, never its text.
    pet = by_id[ids["pet"]]
    assert pet["text"] is None and pet["retired_reason"] == "source-forgotten"
    assert pet["history"][-1]["forgetting_reason"] == "asked"

    # Writing the records read back gives the same file, byte for byte.
    again = io.StringIO()
    again.write('{"format":"ember-facts","version":1}\n')
    for record in records:
        again.write(format_record(record) + "\n")
    assert again.getvalue() == text


@pytest.mark.parametrize(
    ("first", "message"),
    [
        ("", "line 1: not a facts export"),
        ('{"format":"ember","version":1}', "line 1: not a facts export"),
        ('{"format":"ember-facts","version":2}', "line 1: unknown format version 2"),
    ],
)
def test_read_facts_refuses_a_foreign_header(first: str, message: str) -> None:
    with pytest.raises(FactsFileError, match=message):
        read_facts(io.StringIO(first + "\n"))


def test_read_facts_names_a_bad_line() -> None:
    bad = '{"format":"ember-facts","version":1}\n{"type":"fact"}\nnot json\n'
    with pytest.raises(FactsFileError, match="line 3: not JSON"):
        read_facts(io.StringIO(bad))


def test_ember_export_facts_writes_the_file(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _world(db)
    monkeypatch.setenv("DATABASE_URL", db)
    target = tmp_path / "facts.jsonl"
    assert cli.main(["export", "--facts", "--output", str(target)]) == 0
    text = target.read_text(encoding="utf-8")
    assert MARKER not in text
    records = read_facts(io.StringIO(text))
    assert [r["id"] for r in records] == sorted(v for k, v in ids.items() if k in FACT_KEYS)


def test_a_thread_export_holds_tombstones_never_erased_text(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _world(db)
    monkeypatch.setenv("DATABASE_URL", db)
    target = tmp_path / "threads.jsonl"
    assert cli.main(["export", "--output", str(target)]) == 0
    text = target.read_text(encoding="utf-8")
    assert MARKER not in text
    messages = [json.loads(line) for line in text.splitlines()[1:]]
    contents = [m["content"] for m in messages if m.get("type") == "message"]
    # The forgotten row keeps its place in the thread, as a tombstone; the others are whole.
    assert contents[0] == "[forgotten]"
    assert contents[1:] == ["I drink tea.", "We will deploy on Fridays.", "Agreed, Fridays."]
    assert ids["said"] < ids["tea_row"]
