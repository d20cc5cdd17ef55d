"""`ember import` / `ember export` (docs/import-format.md): round trip, every rejection,
re-import as a no-op, and the bulk write path's ordering against concurrent appends."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ember.transfer import ImportFileError, format_record, header_line, run_import
from pgwait import blocked_on_lock


def _thread(tid: str, kind: str = "side", status: str = "active", **extra: Any) -> dict[str, Any]:
    record = {"type": "thread", "id": tid, "kind": kind, "title": None, "category": None,
              "seal_tier": "open", "model": None, "status": status,
              "created_at": "2026-03-01T09:00:00.000000Z"}  # fmt: skip
    record.update(extra)
    return record


def _generation(tid: str, ordinal: int, start: str, end: str | None) -> dict[str, Any]:
    return {"type": "generation", "thread": tid, "ordinal": ordinal, "started_at": start,
            "ended_at": end}  # fmt: skip


def _message(
    tid: str, generation: int, role: str, content: str, at: str, **extra: Any
) -> dict[str, Any]:
    author = {"user": "human", "assistant": "agent"}.get(role, "system")
    record = {"type": "message", "thread": tid, "generation": generation, "role": role,
              "author": author, "content": content, "blocks": None, "tool_call_id": None,
              "tool_name": None, "tool_status": None, "from_thread": None,
              "created_at": at}  # fmt: skip
    record.update(extra)
    return record


def _write(path: Path, records: list[dict[str, Any]], header: str | None = None) -> Path:
    lines = [header_line() if header is None else header]
    lines += [format_record(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _corpus() -> list[dict[str, Any]]:
    """A small history in export's canonical order, using every host-API field."""
    t = "2026-03-01T{}.000000Z".format
    return [
        _thread("main", "main", title="Front desk"),
        _thread("trip", title="Trip to Lisbon", created_at="2026-03-01T09:05:00.000000Z"),
        _thread("old", "task", status="archived", created_at="2026-03-01T09:06:00.000000Z"),
        _generation("main", 1, t("09:00:00"), t("10:00:00")),
        _generation("main", 2, t("10:00:00"), None),
        _generation("trip", 1, t("09:05:00"), None),
        _generation("old", 1, t("09:06:00"), None),
        _message("main", 1, "user", "I prefer window seats, ünïcode ok", t("09:01:00")),
        _message("main", 1, "assistant", "Noted.", t("09:01:05"),
                 blocks='[{"type": "text",  "text": "Noted."}]'),
        _message("trip", 1, "tool_result", "200 OK", t("09:06:00"), tool_call_id="c1",
                 tool_name="http_get", tool_status="ok"),
        _message("old", 1, "assistant", "done", t("09:07:00")),
        _message("main", 2, "event", "trip: flights booked", t("10:05:00"), from_thread="trip"),
        _message("main", 2, "user", "the brief", t("10:06:00"), author="main"),
    ]  # fmt: skip


def _export(url: str) -> str:
    from io import StringIO

    from ember.transfer import export_to

    out = StringIO()
    with psycopg.connect(url) as conn:
        export_to(conn, out)
    return out.getvalue()


def _counts(url: str) -> tuple[int, int, int]:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM ember.threads), (SELECT count(*) FROM ember.generations),"
            " (SELECT count(*) FROM ember.messages)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def test_export_of_an_import_equals_the_input(db: str, tmp_path: Path) -> None:
    path = _write(tmp_path / "in.jsonl", _corpus())
    with psycopg.connect(db) as conn:
        result = run_import(conn, path, partial=False, progress=False)
    assert result.written and not result.rejected
    assert (result.threads, result.messages) == (3, 6)
    assert _export(db) == path.read_text(encoding="utf-8")


def test_imported_rows_follow_the_host_api_rules(db: str, tmp_path: Path) -> None:
    path = _write(tmp_path / "in.jsonl", _corpus())
    with psycopg.connect(db) as conn:
        run_import(conn, path, partial=False, progress=False)
        seqs = conn.execute("SELECT content FROM ember.messages ORDER BY seq").fetchall()
        blocks = conn.execute(
            "SELECT blocks::text FROM ember.messages WHERE content = 'Noted.'"
        ).fetchone()
        status = conn.execute("SELECT status FROM ember.threads WHERE id = 'old'").fetchone()
    assert [s[0] for s in seqs] == [r["content"] for r in _corpus() if r["type"] == "message"]
    assert blocks == ('[{"type": "text",  "text": "Noted."}]',), "raw blocks byte for byte"
    assert status == ("archived",), "an archived thread is archived after its history"


def test_reimporting_the_same_file_changes_nothing(db: str, tmp_path: Path) -> None:
    path = _write(tmp_path / "in.jsonl", _corpus())
    with psycopg.connect(db) as conn:
        run_import(conn, path, partial=False, progress=False)
    before = (_counts(db), _export(db))
    with psycopg.connect(db) as conn:
        again = run_import(conn, path, partial=False, progress=False)
    assert again.written and not again.rejected
    assert (again.threads, again.generations, again.messages, again.present) == (0, 0, 0, 6)
    assert (_counts(db), _export(db)) == before


def test_reimporting_an_unchanged_file_is_answered_without_reading_it(
    db: str, tmp_path: Path
) -> None:
    path = _write(tmp_path / "in.jsonl", _corpus())
    with psycopg.connect(db) as conn:
        first = run_import(conn, path, partial=False, progress=False)
        again = run_import(conn, path, partial=False, progress=False)
    assert not first.known
    assert again.known, "the file's digest and its threads' fingerprint answer it"
    assert (again.threads_present, again.generations_present, again.present) == (3, 4, 6)
    assert (again.threads, again.generations, again.messages) == (0, 0, 0)


def test_a_file_whose_threads_changed_since_is_read_again(db: str, tmp_path: Path) -> None:
    path = _write(tmp_path / "in.jsonl", _corpus())
    with psycopg.connect(db) as conn:
        run_import(conn, path, partial=False, progress=False)
        conn.execute("SELECT ember.append_message('default', 'trip', 'assistant', 'later')")
        conn.commit()
        again = run_import(conn, path, partial=False, progress=False)
    assert not again.known, "a thread of the file took a row since: the file is read"
    assert again.written and not again.rejected
    assert (again.messages, again.present, again.generations_present) == (0, 6, 4)
    assert _counts(db)[2] == 7


def test_the_summary_counts_what_the_file_holds(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Generation 1 of a new thread is opened by create_thread, yet it is one of the file's
    generation records; on a second run every kind is counted as already present."""
    from ember.cli import main

    monkeypatch.setenv("DATABASE_URL", db)
    path = _write(tmp_path / "in.jsonl", _corpus())
    assert main(["import", str(path)]) == 0
    assert capsys.readouterr().out.strip() == (
        "imported 3 threads, 4 generations, 6 messages (already present: 0 threads, "
        "0 generations, 0 messages; 0 lines rejected)"
    )
    assert main(["import", str(path)]) == 0
    assert capsys.readouterr().out.strip() == (
        "imported 0 threads, 0 generations, 0 messages (already present: 3 threads, "
        "4 generations, 6 messages; 0 lines rejected)"
    )


def test_an_import_leaves_the_tables_it_wrote_analyzed(db: str, tmp_path: Path) -> None:
    path = _write(tmp_path / "in.jsonl", _corpus())
    with psycopg.connect(db) as conn:
        run_import(conn, path, partial=False, progress=False)
        rows = conn.execute(
            "SELECT relname, last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL "
            "FROM pg_stat_user_tables WHERE schemaname = 'ember' "
            "AND relname IN ('threads', 'generations', 'messages', 'generation_progress') "
            "ORDER BY relname"
        ).fetchall()
    assert rows == [
        ("generation_progress", True), ("generations", True), ("messages", True), ("threads", True)
    ]  # fmt: skip


BAD_LINES = {
    "corrupt line": ('{"type": "message", "thread": ', "not JSON"),
    "not an object": ("[1, 2]", "not a JSON object"),
    "unknown type": ('{"type": "note"}', 'unknown record type "note"'),
    "unknown thread": (
        format_record(_message("ghost", 1, "user", "x", "2026-03-01T09:30:00Z")),
        'unknown thread "ghost"',
    ),
    "unknown role": (
        format_record(_message("trip", 1, "robot", "x", "2026-03-01T09:30:00Z")),
        'unknown role "robot"',
    ),
    "time running backwards": (
        format_record(_message("trip", 1, "user", "x", "2026-03-01T08:00:00Z")),
        "time runs backwards",
    ),
    "bad timestamp": (
        format_record(_message("trip", 1, "user", "x", "half past nine")),
        '"created_at" is not a timestamp',
    ),
    "blocks not JSON": (
        format_record(_message("trip", 1, "assistant", "x", "2026-03-01T09:30:00Z", blocks="[{")),
        '"blocks" must hold JSON text',
    ),
    # JSON that json accepts and jsonb refuses (the escape of character zero): still a line
    # rejected by name, not an error that stops the whole import.
    "NUL escape": (
        format_record(_message("trip", 1, "user", "a\u0000b", "2026-03-01T09:30:00Z")),
        "not JSON",
    ),
    "unknown field": ('{"type": "thread", "id": "z", "kind": "side", "colour": "red", '
                      '"created_at": "2026-03-01T09:00:00Z"}', 'unknown field "colour"'),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_a_bad_line_is_named_and_nothing_is_imported(db: str, tmp_path: Path, case: str) -> None:
    line, reason = BAD_LINES[case]
    good = [format_record(r) for r in _corpus()]
    body = [*good[:9], line, *good[9:]]  # the bad line is line 11 of the file
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([header_line(), *body]) + "\n", encoding="utf-8")
    with psycopg.connect(db) as conn:
        result = run_import(conn, path, partial=False, progress=False)
    assert not result.written
    assert [line_no for line_no, _ in result.rejected] == [11]
    assert reason in result.rejected[0][1]
    assert _counts(db) == (0, 0, 0), "all or nothing"


def test_partial_imports_the_valid_lines_and_reports_the_rest(db: str, tmp_path: Path) -> None:
    good = [format_record(r) for r in _corpus()]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([header_line(), *good, "oops"]) + "\n", encoding="utf-8")
    with psycopg.connect(db) as conn:
        result = run_import(conn, path, partial=True, progress=False)
    assert result.written and result.rejected == [(len(good) + 2, "not JSON")]
    assert _counts(db)[2] == 6


def test_a_message_for_an_archived_thread_is_rejected(db: str, tmp_path: Path) -> None:
    with psycopg.connect(db) as conn:
        run_import(conn, _write(tmp_path / "a.jsonl", _corpus()), partial=False, progress=False)
    later = _message("old", 1, "assistant", "one more", "2026-03-01T11:00:00.000000Z")
    path = _write(tmp_path / "b.jsonl", [*_corpus(), later])
    with psycopg.connect(db) as conn:
        result = run_import(conn, path, partial=False, progress=False)
    assert result.rejected == [
        (len(_corpus()) + 2, 'thread "old" is archived: it takes no new messages')
    ]


def test_a_file_that_is_not_jsonl_is_refused_at_line_1(db: str, tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("id,content\n1,hello\n")
    with psycopg.connect(db) as conn, pytest.raises(ImportFileError, match="line 1: not JSON"):
        run_import(conn, path, partial=False, progress=False)


def test_an_unknown_version_is_refused_at_line_1(db: str, tmp_path: Path) -> None:
    path = _write(
        tmp_path / "v2.jsonl", _corpus(), header=json.dumps({"format": "ember", "version": 2})
    )
    with (
        psycopg.connect(db) as conn,
        pytest.raises(ImportFileError, match="unknown format version 2"),
    ):
        run_import(conn, path, partial=False, progress=False)
    assert _counts(db) == (0, 0, 0)


def test_cli_import_and_export(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ember.cli import main

    monkeypatch.setenv("DATABASE_URL", db)
    path = _write(tmp_path / "in.jsonl", _corpus())
    assert main(["import", str(path)]) == 0
    assert "imported 3 threads" in capsys.readouterr().out
    out = tmp_path / "out.jsonl"
    assert main(["export", "--output", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(header_line() + "\n{oops\n")
    assert main(["import", str(bad)]) == 10
    assert f"{bad}:2: not JSON" in capsys.readouterr().err


def test_concurrent_appends_and_a_bulk_append_keep_seq_in_commit_order(db: str) -> None:
    """A bulk append waits for an open single append to the thread; each commit's rows get
    later seqs than every row committed before it, and the bulk's rows stay contiguous."""
    with psycopg.connect(db) as conn:
        conn.execute("SELECT ember.create_thread('default', 't', 'side')")
    single = psycopg.connect(db, application_name="single")
    bulk = psycopg.connect(db, application_name="bulk")
    try:
        single.execute("SELECT ember.append_message('default', 't', 'user', 'single first')")
        done = threading.Event()

        def run_bulk() -> None:
            rows = [{"role": "assistant", "content": f"bulk {i}"} for i in range(200)]
            bulk.execute(
                "SELECT ember.append_messages('default', 't', %s::json)", (json.dumps(rows),)
            )
            bulk.commit()
            done.set()

        worker = threading.Thread(target=run_bulk)
        worker.start()
        assert blocked_on_lock(db, "bulk"), "the bulk append must wait for the thread's lock"
        single.execute("SELECT ember.append_message('default', 't', 'user', 'single second')")
        single.commit()
        assert done.wait(20)
        worker.join(20)
        single.execute("SELECT ember.append_message('default', 't', 'user', 'single after')")
        single.commit()
    finally:
        single.close()
        bulk.close()
    with psycopg.connect(db) as conn:
        rows = conn.execute(
            "SELECT content FROM ember.messages WHERE thread_id = 't' ORDER BY seq"
        ).fetchall()
        spread = conn.execute(
            "SELECT max(seq) - min(seq) FROM ember.messages WHERE content LIKE 'bulk %'"
        ).fetchone()
    contents = [r[0] for r in rows]
    assert contents[:2] == ["single first", "single second"]
    assert contents[2:202] == [f"bulk {i}" for i in range(200)]
    assert contents[202:] == ["single after"]
    assert spread == (199,)
