"""`ember review` end to end: the real command in a subprocess against a test database whose
review queue was filled through submit_consolidation_run, as the consolidation job fills it.

The queue's rules are SQL's (pgtap/100_consolidation.sql); these tests hold the command to them:
what it lists, what a decision changes, how each refusal reads and exits, and that a text
written by a model or a person never passes for a row of the table.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from ember.cli import EXIT_NOT_FOUND, EXIT_REFUSED
from test_cli import ember, one_line_failure

# Text that, shown raw, would end its line, start a row of its own that names item 99, colour
# the terminal, or be read by rich as markup.
ROW_LOOKALIKE = "| 99 | accept |"
HOSTILE_REASON = f"likes and hates jazz\n{ROW_LOOKALIKE}\n\x1b[2J\x1b[31mred\x1b[0m [bold]x[/bold]"
# A fact's text is cleaned of line breaks and controls as it is stored, and never changes after:
# what is left to render safely is text that mimics the table, markup and a bidi override.
HOSTILE_FACT = (
    "The user hates jazz. \u2502 99 \u2502 accept \u2502 "
    f"{ROW_LOOKALIKE} [red]loud[/red] \u202eevil"
)
HOSTILE_NOTE = f"both hold\n{ROW_LOOKALIKE}\n\x1b]0;owned\x07\u202eevil"


@dataclass(frozen=True)
class Queue:
    run: int
    merge: int  # a merge of two tea facts held back below the threshold
    flag: int  # a contradiction the job flagged, with hostile texts
    supersede: int  # a supersede held back, which its check refuses when accepted
    applied: int  # an action the job applied itself: never waiting
    tea: tuple[int, int]
    jazz: tuple[int, int]


def _fact(conn: psycopg.Connection[Any], text: str, at: datetime, message: int) -> int:
    row = conn.execute(
        "INSERT INTO ember.facts (text, evidence_kind, categories, source_threads, created_at,"
        " updated_at) SELECT %s, 'user-stated', '{}', ARRAY[m.thread_id], %s, %s"
        " FROM ember.messages AS m WHERE m.id = %s RETURNING id",
        (text, at, at, message),
    ).fetchone()
    assert row is not None
    conn.execute(
        "INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id) VALUES (%s, 1, %s)",
        (row[0], message),
    )
    return int(row[0])


def _message(conn: psycopg.Connection[Any], thread: str, text: str, at: datetime) -> int:
    row = conn.execute(
        "SELECT ember.append_message('default', %s, 'user', %s, p_now => %s)", (thread, text, at)
    ).fetchone()
    assert row is not None
    return int(row[0])


def _act(
    action: str, ids: list[int], reason: str, confidence: float, text: str | None = None
) -> dict[str, Any]:
    act: dict[str, Any] = {
        "action": action,
        "fact_ids": ids,
        "reason": reason,
        "confidence": confidence,
    }
    if text is not None:
        act["text"] = text
    return act


def build_queue(url: str) -> Queue:
    """Facts in two threads, one consolidation run over them, and its submit: one action
    applied, one flagged, two held back below consolidation_min_confidence."""
    now = datetime.now(UTC)
    day1, day2 = now - timedelta(days=3), now - timedelta(days=2)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE ember.models SET tags = '{}' WHERE tier = 'light'")
        for thread in ("a", "b"):
            conn.execute(
                "SELECT ember.create_thread('default', %s, 'side', %s, p_now => %s)",
                (thread, thread.upper(), day1 - timedelta(hours=1)),
            )
        m_tea_a = _message(conn, "a", "I prefer tea.", day1)
        m_tea_b = _message(conn, "b", "I really prefer tea.", day2)
        m_jazz = _message(conn, "a", "I like jazz.", day1 + timedelta(hours=1))
        m_nojazz = _message(conn, "b", "I hate jazz.", day2 + timedelta(hours=1))
        m_berlin = _message(conn, "a", "I live in Berlin.", day1 + timedelta(hours=2))
        m_lisbon = _message(conn, "b", "I moved to Lisbon.", day2 + timedelta(hours=2))
        tea1 = _fact(conn, "The user prefers tea.", day1, m_tea_a)
        tea2 = _fact(conn, "User prefers tea.", day2, m_tea_b)
        jazz = _fact(conn, "The user likes jazz.", day1, m_jazz)
        nojazz = _fact(conn, HOSTILE_FACT, day2, m_nojazz)
        berlin = _fact(conn, "The user lives in Berlin.", day1, m_berlin)
        lisbon = _fact(conn, "The user lives in Lisbon.", day2, m_lisbon)

        plan = conn.execute("SELECT ember.claim_consolidation_run('w', '10 minutes')").fetchone()
        assert plan is not None and plan[0] is not None, "no consolidation group was due"
        run = int(plan[0]["run_id"])
        actions = [
            _act("supersede", [berlin, lisbon], "the user moved", 0.9),
            _act("merge", [tea1, tea2], "the same preference, said twice", 0.5,
                 "The user prefers tea.\n| 98 | reject |"),
            _act("flag", [jazz, nojazz], HOSTILE_REASON, 0.4),
            _act("supersede", [nojazz, jazz], "unsure which came last", 0.3),
        ]  # fmt: skip
        done = conn.execute(
            "SELECT ember.submit_consolidation_run(%s,"
            " (SELECT lease_token FROM ember.consolidation_runs WHERE id = %s), %s)",
            (
                run,
                run,
                Jsonb(
                    {
                        "status": "completed",
                        "finished_at": datetime.now(UTC).isoformat(),
                        "actions": actions,
                    }
                ),
            ),
        ).fetchone()
        assert done is not None
        assert {k: done[0][k] for k in ("applied", "flagged")} == {"applied": 1, "flagged": 3}
        ids: dict[int, int] = dict(
            conn.execute(
                "SELECT ordinal, id FROM ember.consolidation_actions WHERE run_id = %s", (run,)
            ).fetchall()
        )
    return Queue(run, ids[2], ids[3], ids[4], ids[1], (tea1, tea2), (jazz, nojazz))


@pytest.fixture(name="queue")
def _queue(db: str) -> Queue:
    return build_queue(db)


def _query(url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()


def _body_lines(stdout: str) -> list[str]:
    """Every line of every table's body: those between its header and its bottom rule."""
    return [line for line in stdout.splitlines() if line.startswith("│")]


def _row_ids(stdout: str) -> list[str]:
    """The items listed: a row is a body line whose first cell (the id column) is not empty."""
    ids = [line.split("│")[1].strip() for line in _body_lines(stdout)]
    return [i for i in ids if i]


def test_the_list_shows_what_waits_with_its_facts(db: str, queue: Queue) -> None:
    for argv in (("review",), ("review", "list")):
        out = ember(*argv, url=db)
        assert out.returncode == 0, out.stderr
        assert "3 waiting" in out.stdout
        ids = _row_ids(out.stdout)
        assert ids == [str(queue.merge), str(queue.flag), str(queue.supersede)]
        assert "low-confidence merge" in out.stdout and "contradiction" in out.stdout
        assert f'F{queue.tea[0]} active: "The user prefers tea."' in out.stdout
        assert "0.50" in out.stdout
        assert str(queue.applied) not in ids, "an applied action never waits"
        assert "Decided" not in out.stdout


def test_accept_applies_a_held_back_merge(db: str, queue: Queue) -> None:
    out = ember("review", "accept", str(queue.merge), "--note", "same thing", url=db)
    assert out.returncode == 0, out.stderr
    merged = _query(
        db,
        "SELECT status, result_fact, review, reviewed_by, review_note"
        " FROM ember.consolidation_actions WHERE id = %s",
        queue.merge,
    )[0]
    assert merged[0] == "applied" and merged[2] == "accepted" and merged[4] == "same thing"
    role = _query(db, "SELECT current_user::text")[0][0]
    assert merged[3] == role, "without --by, the decision names the connected role"
    new = merged[1]
    assert new is not None
    assert f"action {queue.merge} (merge): accepted by {role}" in out.stdout
    assert f"applied: fact {new}" in out.stdout
    sources = _query(
        db, "SELECT status, merged_into FROM ember.facts WHERE id = ANY(%s)", list(queue.tea)
    )
    assert sources == [("merged", new), ("merged", new)]
    assert _query(db, "SELECT status, text FROM ember.facts WHERE id = %s", new) == [
        ("active", "The user prefers tea. | 98 | reject |")
    ]
    listed = ember("review", url=db)
    assert str(queue.merge) not in _row_ids(listed.stdout)


def test_reject_records_who_and_the_note(db: str, queue: Queue) -> None:
    before = _query(db, "SELECT id, status, text FROM ember.facts ORDER BY id")
    out = ember("review", "reject", str(queue.flag), "--by", "ana", "--note", HOSTILE_NOTE, url=db)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(f"action {queue.flag} (flag): rejected by ana at ")
    assert _query(
        db,
        "SELECT status, review, reviewed_by, review_note, reviewed_at IS NOT NULL"
        " FROM ember.consolidation_actions WHERE id = %s",
        queue.flag,
    ) == [("flagged", "rejected", "ana", HOSTILE_NOTE, True)]
    assert _query(db, "SELECT id, status, text FROM ember.facts ORDER BY id") == before

    listed = ember("review", "--all", url=db)
    assert listed.returncode == 0, listed.stderr
    assert "2 waiting" in listed.stdout and "Decided: 1" in listed.stdout
    decided = listed.stdout.split("Decided: 1", 1)[1]
    assert "rejected by ana at " in decided
    assert json.dumps(HOSTILE_NOTE, ensure_ascii=False).replace("\u202e", "\\u202e") in decided


def test_a_decided_item_cannot_be_decided_again(db: str, queue: Queue) -> None:
    assert ember("review", "reject", str(queue.flag), url=db).returncode == 0
    for decision in ("accept", "reject"):
        out = ember("review", decision, str(queue.flag), "--by", "bo", url=db)
        one_line_failure(out, EXIT_REFUSED, "EM136", f"{queue.flag} is not waiting", "rejected")
    out = ember("review", "accept", str(queue.applied), url=db)
    one_line_failure(out, EXIT_REFUSED, "EM136", "not waiting for review (it is applied)")
    assert _query(
        db, "SELECT reviewed_by FROM ember.consolidation_actions WHERE id = %s", queue.flag
    ) == [(_query(db, "SELECT current_user::text")[0][0],)]


def test_a_check_that_refuses_the_action_now_leaves_it_queued(db: str, queue: Queue) -> None:
    out = ember("review", "accept", str(queue.supersede), url=db)
    one_line_failure(out, EXIT_REFUSED, "EM135", "newer")
    assert _query(
        db,
        "SELECT status, review FROM ember.consolidation_actions WHERE id = %s",
        queue.supersede,
    ) == [("flagged", None)]
    assert str(queue.supersede) in _row_ids(ember("review", url=db).stdout)


def test_an_unknown_id_is_no_such_item(db: str, queue: Queue) -> None:
    missing = queue.supersede + 1000
    out = ember("review", "accept", str(missing), url=db)
    one_line_failure(out, EXIT_NOT_FOUND, f"no consolidation action {missing}", "EM136")
    one_line_failure(ember("review", "reject", "-5", url=db), EXIT_NOT_FOUND, "EM136")


def test_an_empty_name_is_refused_by_sql(db: str, queue: Queue) -> None:
    out = ember("review", "reject", str(queue.flag), "--by", " ", url=db)
    one_line_failure(out, EXIT_REFUSED, "names who decided", "EM136")


def test_hostile_text_never_passes_for_a_row(db: str, queue: Queue) -> None:
    ember("review", "reject", str(queue.merge), "--by", "ana", "--note", HOSTILE_NOTE, url=db)
    out = ember("review", "--all", url=db)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    # Nothing reaches the terminal as control: no escape, no bell, no bidi override.
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", text)
    # The only ids in the id column are the real ones, once each.
    assert _row_ids(text) == [str(queue.flag), str(queue.supersede), str(queue.merge)]
    # Every column border on a line is the table's own: as many as its header has, always.
    borders = 0
    for line in text.splitlines():
        if line.startswith("┃"):
            borders = line.count("┃")
        elif line.startswith("│"):
            assert line.count("│") == borders, line
    assert borders == 8, "the decided table has seven columns"
    # Each hostile text is one JSON string literal inside its cell, on one line.
    assert json.dumps(HOSTILE_REASON) in text
    assert '"The user prefers tea.\\n| 98 | reject |"' in text
    shown = json.dumps(HOSTILE_FACT, ensure_ascii=False)
    shown = shown.replace("\u2502", "\\u2502").replace("\u202e", "\\u202e")
    assert f"F{queue.jazz[1]} active: {shown}" in text
    assert "[red]loud[/red]" in text and "[bold]x[/bold]" in text, "markup is shown, not read"
    for line in text.splitlines():
        if ROW_LOOKALIKE in line or "98 | reject" in line:
            # Inside a quoted string: an odd number of quotes before it on its line.
            before = line.split(ROW_LOOKALIKE if ROW_LOOKALIKE in line else "98 | reject")[0]
            assert before.count('"') % 2 == 1, line


def test_json_is_the_sql_answer(db: str, queue: Queue) -> None:
    out = ember("review", "--json", url=db)
    assert out.returncode == 0, out.stderr
    items = json.loads(out.stdout)
    assert [i["action_id"] for i in items] == [queue.merge, queue.flag, queue.supersede]
    flag = items[1]
    assert flag["item"] == "contradiction" and flag["reason"] == HOSTILE_REASON
    assert [f["id"] for f in flag["facts"]] == list(queue.jazz)
    assert flag["facts"][1]["text"] == HOSTILE_FACT
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", out.stdout)

    decided = ember(
        "review", "reject", str(queue.flag), "--json", "--by", "ana", "--note", HOSTILE_NOTE, url=db
    )
    assert decided.returncode == 0, decided.stderr
    answer = json.loads(decided.stdout)
    assert {k: answer[k] for k in ("action_id", "action", "review", "applied", "reviewed_by")} == {
        "action_id": queue.flag,
        "action": "flag",
        "review": "rejected",
        "applied": False,
        "reviewed_by": "ana",
    }
    every = json.loads(ember("review", "list", "--all", "--json", url=db).stdout)
    assert [(i["action_id"], i.get("review")) for i in every] == [
        (queue.merge, None),
        (queue.supersede, None),
        (queue.flag, "rejected"),
    ]
    assert every[2]["review_note"] == HOSTILE_NOTE and every[2]["reviewed_by"] == "ana"


def test_an_empty_queue_says_so(db: str) -> None:
    out = ember("review", url=db)
    assert out.returncode == 0, out.stderr
    assert "0 waiting" in out.stdout and "nothing waits for a person" in out.stdout
    assert json.loads(ember("review", "--json", url=db).stdout) == []


def test_accepting_a_flag_changes_no_fact(db: str, queue: Queue) -> None:
    before = _query(db, "SELECT id, status, text FROM ember.facts ORDER BY id")
    out = ember("review", "accept", str(queue.flag), "--by", "ana", url=db)
    assert out.returncode == 0, out.stderr
    assert f"action {queue.flag} (flag): accepted by ana at " in out.stdout
    assert out.stdout.rstrip().endswith("; no fact changed")
    assert _query(db, "SELECT id, status, text FROM ember.facts ORDER BY id") == before
    assert _query(
        db, "SELECT status, review FROM ember.consolidation_actions WHERE id = %s", queue.flag
    ) == [("flagged", "accepted")]


def test_a_decided_item_of_a_thread_sealed_since_is_left_out(db: str, queue: Queue) -> None:
    assert ember("review", "reject", str(queue.flag), url=db).returncode == 0
    assert ember("review", "reject", str(queue.merge), url=db).returncode == 0
    # Both decided items name a fact of thread b: listed while b is open, left out once sealed.
    every = json.loads(ember("review", "--all", "--json", url=db).stdout)
    assert {i["action_id"] for i in every if i.get("review")} == {queue.flag, queue.merge}
    _query(db, "UPDATE ember.threads SET seal_tier = 'isolated' WHERE id = 'b' RETURNING id")
    every = json.loads(ember("review", "--all", "--json", url=db).stdout)
    assert [i["action_id"] for i in every if i.get("review")] == []
