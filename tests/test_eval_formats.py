"""LoCoMo and LongMemEval files read into conversations and questions, and written as Ember import
files: the mapping (conversation, session, speaker), the question ids and categories, the
exclusion list and the limit, and a clear error for each kind of bad file."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ember.evaluation import formats
from ember.evaluation.formats import BenchmarkFileError
from ember.transfer import run_import

DATA = Path(__file__).resolve().parent / "data" / "eval"
LOCOMO = DATA / "locomo_small.json"
LME = DATA / "longmemeval_small.json"


def raw(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def test_locomo_maps_speakers_sessions_and_questions() -> None:
    bench = formats.load(LOCOMO)
    assert bench.kind == "locomo"
    assert [c.id for c in bench.conversations] == ["conv-a", "conv-b"]
    a = bench.conversation("conv-a")
    assert "Ada (the user)" in a.title and "Bruno (the assistant)" in a.title
    assert [s.source for s in a.sessions] == ["session_1", "session_2", "session_3"]
    first = a.sessions[0].turns
    assert (first[0].role, first[1].role) == ("user", "assistant")
    assert (
        first[0].content == "Ada: Hi Bruno! I love pottery, I go to a class every Tuesday evening."
    )
    assert first[1].content.startswith("Bruno: ")
    assert first[3].content.endswith("[shares a photo: a photo of a teal bowl on a wheel]")
    assert first[0].source == "D1:1"
    assert a.sessions[0].start == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    # conv-b lists session_2 before session_1 in the file: sessions go in date order.
    assert [s.source for s in bench.conversation("conv-b").sessions] == ["session_1", "session_2"]
    q = {x.id: x for x in bench.questions}
    assert len(q) == 21 and q["conv-a/0"].gold == "pottery"
    assert q["conv-a/2"].category == "2 temporal" and q["conv-a/0"].category == "4 single-hop"
    assert q["conv-a/8"].gold == formats.NOT_MENTIONED  # adversarial, no answer of its own
    assert q["conv-a/0"].evidence == ["D1:1"]


def test_longmemeval_maps_haystacks_types_and_abstention() -> None:
    bench = formats.load(LME)
    assert bench.kind == "longmemeval"
    assert len(bench.conversations) == len(bench.questions) == 6
    move = bench.conversation("lme-move")
    # The file lists the later session first (as the oracle file does): sorted by date.
    assert [s.source for s in move.sessions] == ["answer_move_1", "answer_move_2"]
    assert (
        move.sessions[1].turns[0].has_answer
        and move.sessions[1].turns[0].source == "answer_move_2#1"
    )
    q = {x.id: x for x in bench.questions}
    assert q["lme-sister_abs"].category == "single-session-user (abstention)"
    assert q["lme-move"].category == "knowledge-update"
    assert q["lme-milk"].question_date == "2023/06/01 (Thu) 09:00"
    assert q["lme-move"].evidence == ["answer_move_1", "answer_move_2"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("12:05 am on 1 Jan, 2024", datetime(2024, 1, 1, 0, 5, tzinfo=UTC)),
        ("2023/05/20 (Sat) 02:21", datetime(2023, 5, 20, 2, 21, tzinfo=UTC)),
        ("2023/05/20", datetime(2023, 5, 20, tzinfo=UTC)),
        ("2023-05-20T02:21:00+02:00", datetime(2023, 5, 20, 0, 21, tzinfo=UTC)),
    ],
)
def test_dates_of_both_benchmarks(text: str, expected: datetime) -> None:
    assert formats.parse_date(text) == expected


def locomo_with(change: Any) -> Any:
    data = copy.deepcopy(raw(LOCOMO))
    change(data)
    return data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d[0]["conversation"]["session_1"][0].update(speaker="Eve"),
         r"samples\[0\] \(conv-a\): conversation.session_1\[0\]: speaker 'Eve' is neither"),
        (lambda d: d[0]["conversation"].update(session_2_date_time="soon"),
         r"conversation.session_2_date_time: unreadable date 'soon'"),
        (lambda d: d[1]["qa"][0].pop("answer"),
         r"samples\[1\] \(conv-b\): qa\[0\]: the answer is missing"),
        (lambda d: d[1]["qa"][0].update(category=9), r"category 9 is not one of LoCoMo's 1-5"),
        (lambda d: d[0]["conversation"].pop("speaker_b"), r"conversation.speaker_b is missing"),
        (lambda d: d[1].update(sample_id="conv-a"), r"sample_id 'conv-a' appears twice"),
        (lambda d: d[0]["qa"][0].update(question=""), r"qa\[0\].question"),
    ],
)  # fmt: skip
def test_a_bad_locomo_file_names_where(change: Any, message: str) -> None:
    with pytest.raises(BenchmarkFileError, match=message):
        formats.parse(locomo_with(change))


def test_a_bad_longmemeval_file_names_where() -> None:
    data = raw(LME)
    data[1]["haystack_dates"].pop()
    with pytest.raises(
        BenchmarkFileError, match=r"questions\[1\] \(lme-move\): .* differ in length"
    ):
        formats.parse(data)
    data = raw(LME)
    data[2]["haystack_sessions"][0][0]["role"] = "system"
    with pytest.raises(
        BenchmarkFileError, match=r"questions\[2\] \(lme-sister_abs\).haystack_sessions"
    ):
        formats.parse(data)


def test_neither_benchmark(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkFileError, match=r"neither LoCoMo .* nor LongMemEval"):
        formats.parse([{"question": "?", "answer": "!"}])
    path = tmp_path / "x.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(BenchmarkFileError, match="not JSON"):
        formats.load(path)


def test_exclusions_and_the_limit() -> None:
    bench = formats.load(LOCOMO)
    excluded = formats.read_exclusions(DATA / "locomo_exclude.txt")
    assert excluded == ["conv-a/7", "conv-b/2"]
    chosen = formats.select(bench, excluded, None)
    assert len(chosen.asked) == 19 and [q.id for q in chosen.excluded] == excluded
    assert len(chosen.questions) == 21
    # The first 5 asked questions are all conv-a's: conv-b is not imported, nor its exclusions.
    limited = formats.select(bench, excluded, 5)
    assert [c.id for c in limited.conversations] == ["conv-a"]
    assert [q.id for q in limited.asked] == [f"conv-a/{n}" for n in range(5)]
    assert [q.id for q in limited.excluded] == ["conv-a/7"]
    with pytest.raises(BenchmarkFileError, match=r"1 id\(s\) of the exclusion list .* 'conv-a#7'"):
        formats.select(bench, ["conv-a#7"], None)


def test_the_import_file_keeps_the_order_and_the_dates(db: str, tmp_path: Path) -> None:
    """Through `ember import`'s own code: a side thread, a generation per session starting at the
    session's date, a message per turn with the speaker's role, in the file's order."""
    conv = formats.load(LOCOMO).conversation("conv-a")
    placed = formats.import_file_text(conv, "eval-0001")
    path = tmp_path / "conv.jsonl"
    path.write_text(placed.text, encoding="utf-8")
    with psycopg.connect(db) as conn:
        result = run_import(conn, path, partial=False, progress=False)
        assert result.written and not result.rejected
        # The file's three generation records, generation 1 among them (it opens with its
        # thread, and still counts as one the file brought).
        assert (result.threads, result.generations, result.messages) == (1, 3, 32)
        thread = conn.execute(
            "SELECT kind, status, title FROM ember.threads WHERE id = 'eval-0001'"
        ).fetchone()
        assert thread is not None and thread[:2] == ("side", "ended") and "Ada" in thread[2]
        gens = conn.execute(
            "SELECT ordinal, started_at, ended_at IS NOT NULL FROM ember.generations "
            "WHERE thread_id = 'eval-0001' ORDER BY ordinal"
        ).fetchall()
        assert [g[1] for g in gens] == [s.start for s in conv.sessions]
        assert all(g[2] for g in gens)
        rows = conn.execute(
            "SELECT g.ordinal, m.role, m.author, m.content, m.created_at FROM ember.messages AS m "
            "JOIN ember.generations AS g ON g.id = m.generation_id "
            "WHERE m.thread_id = 'eval-0001' ORDER BY m.seq"
        ).fetchall()
    turns = [(n, t) for n, s in enumerate(conv.sessions, start=1) for t in s.turns]
    assert [(r[0], r[1], r[3]) for r in rows] == [(n, t.role, t.content) for n, t in turns]
    assert {r[2] for r in rows if r[1] == "user"} == {"human"}
    assert {r[2] for r in rows if r[1] == "assistant"} == {"agent"}
    times = [r[4] for r in rows]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert placed.turns[0] == {
        "generation": 1,
        "position": 1,
        "source": "D1:1",
        "has_answer": False,
    }
