"""`ember import` of hostile files (docs/import-format.md, "How a file is read"): a line that is
not UTF-8, holds a NUL byte, or is longer than a line may be is refused by its line number while
the file is read, never as an unexpected error; an over-long line is skipped without being held;
without --partial every rejected line is listed and nothing is written, with --partial the good
lines are written and each bad one is reported once."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from ember.transfer import (
    ImportFileError,
    ImportResult,
    LineReader,
    Refused,
    decode_line,
    line_limit,
    run_import,
)
from reliability import record

ROOT = Path(__file__).resolve().parent.parent
# Hostile lines refused with their line number, across the module, for docs/reliability.md.
REFUSED = {"lines": 0}
HEADER = b'{"format":"ember","version":1}'
# max_message_bytes for these tests, and the longest line it allows: 6 * 1000 + 65536.
SMALL = 1000
SMALL_LINE = 71536
MB = 1 << 20


def _thread(tid: str = "t1") -> bytes:
    record = {"type": "thread", "id": tid, "kind": "side", "created_at": "2026-03-01T08:00:00Z"}
    return json.dumps(record).encode()


def _message(content: str, second: int, tid: str = "t1") -> bytes:
    record = {"type": "message", "thread": tid, "generation": 1, "role": "user",
              "content": content, "created_at": f"2026-03-01T09:00:{second:02d}Z"}  # fmt: skip
    return json.dumps(record, ensure_ascii=False).encode()


def _raw_message(content: bytes, second: int) -> bytes:
    """A message whose content is written as these bytes, whatever they are."""
    return _message("@", second).replace(b'"@"', b'"' + content + b'"')


def _padded(line: bytes, length: int) -> bytes:
    """The same record, spaces before its closing brace, `length` bytes long."""
    assert line.endswith(b"}") and len(line) <= length
    return line[:-1] + b" " * (length - len(line)) + b"}"


def _file(path: Path, *lines: bytes) -> Path:
    path.write_bytes(b"\n".join([HEADER, *lines]) + b"\n")
    return path


def _contents(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT content FROM ember.messages ORDER BY seq").fetchall()
    return [row[0] for row in rows]


def _cli(url: str, path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ember.cli", "import", str(path), *flags],
        capture_output=True,
        text=True,
        env={**os.environ, "DATABASE_URL": url},
        cwd=ROOT,
        timeout=120,
    )


@pytest.fixture
def small(db: str) -> str:
    """A database whose max_message_bytes is 1000, so that a line may be 71,536 bytes."""
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(
            "UPDATE ember.settings SET value = %s::jsonb WHERE key = 'max_message_bytes'",
            (str(SMALL),),
        )
    return db


@pytest.fixture(scope="module", autouse=True)
def _ledger() -> Iterator[None]:
    yield
    record(
        "hostile-lines",
        "import lines with invalid UTF-8, a NUL byte, 20 MB and one byte over the bound, cut-off"
        " JSON, a header that is not UTF-8 or too long, content over max_message_bytes; with and"
        " without --partial",
        REFUSED["lines"],
        "0 lines unreported or reported twice; 0 rows written without --partial",
        "tests/test_import_hostile.py",
    )


def _imported(conn: psycopg.Connection, path: Path, *, partial: bool) -> ImportResult:
    """run_import, each refused line counted for the ledger."""
    result = run_import(conn, path, partial=partial, progress=False)
    REFUSED["lines"] += len(result.rejected)
    return result


# --- the reader, on streams in memory ---


class _Stream:
    """`size` bytes of one line produced on demand, then `tail`: a file far larger than anything
    the test keeps. Records the largest read asked of it."""

    def __init__(self, size: int, tail: bytes) -> None:
        self.left = size
        self.tail = tail
        self.largest_read = 0

    def read(self, size: int, /) -> bytes:
        self.largest_read = max(self.largest_read, size)
        if self.left > 0:
            n = min(size, self.left)
            self.left -= n
            return b"x" * n
        out, self.tail = self.tail[:size], self.tail[size:]
        return out


def _read(data: bytes, limit: int, chunk_size: int) -> list[tuple[int, str | Refused]]:
    return list(LineReader(io.BytesIO(data), limit, chunk_size=chunk_size))


def test_the_line_bound_is_six_bytes_a_content_byte_and_64_kib() -> None:
    assert line_limit(SMALL) == SMALL_LINE
    assert line_limit(1 << 20) == 6 * (1 << 20) + 65536


@pytest.mark.parametrize("chunk_size", [1, 3, 7, 10, 11, 12, 4096])
def test_lines_are_numbered_across_chunks(chunk_size: int) -> None:
    data = b"first\n\nthird line\r\nlast, no newline"
    assert _read(data, 100, chunk_size) == [
        (1, "first"), (2, ""), (3, "third line\r"), (4, "last, no newline")
    ]  # fmt: skip


@pytest.mark.parametrize("chunk_size", [1, 5, 9, 10, 11, 64])
def test_a_line_of_exactly_the_limit_is_read_and_one_byte_more_is_refused(
    chunk_size: int,
) -> None:
    data = b"a" * 10 + b"\n" + b"b" * 11 + b"\n" + b"c" * 10 + b"\n" + b"d" * 11
    lines = _read(data, 10, chunk_size)
    assert [number for number, _ in lines] == [1, 2, 3, 4]
    assert lines[0] == (1, "a" * 10) and lines[2] == (3, "c" * 10)
    for _, refused in (lines[1], lines[3]):
        assert isinstance(refused, Refused)
        assert refused.reason.startswith("the line is 11 bytes, longer than a line may be (10 ")


def test_a_line_many_times_the_limit_is_skipped_without_being_held() -> None:
    limit, size = 65536, 20 * MB
    stream = _Stream(size, b"\nafter\n")
    reader = LineReader(stream, limit, chunk_size=4096)
    tracemalloc.start()
    try:
        lines = list(reader)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert lines == [
        (1, Refused(f"the line is {size} bytes, longer than a line may be ({limit} bytes, "
                    "from the setting max_message_bytes)")),
        (2, "after"),
    ]  # fmt: skip
    assert reader.most_held <= limit, "no more than the limit of one line is kept"
    assert stream.largest_read == 4096, "the file is read a chunk at a time"
    assert peak < 4 * limit, f"reading held {peak} bytes of a {size}-byte line"


def test_invalid_utf8_names_its_byte_offset_and_field() -> None:
    line = _raw_message(b"caf\xc3(", 1)
    offset = line.index(b"\xc3")
    assert decode_line(line) == Refused(
        f'"content" is not UTF-8: byte 0xc3 at offset {offset} of the line '
        "(invalid continuation byte)"
    )
    assert decode_line(b'{"ty\xffpe": 1}') == Refused(
        "a field name is not UTF-8: byte 0xff at offset 4 of the line (invalid start byte)"
    )
    assert decode_line(b"\xfe{}") == Refused(
        "not UTF-8: byte 0xfe at offset 0 of the line (invalid start byte)"
    )
    # A byte inside a nested value is in the value of its top-level field.
    nested = b'{"type": "message", "blocks": {"a": ["\xff"]}}'
    reason = decode_line(nested)
    assert isinstance(reason, Refused) and reason.reason.startswith('"blocks" is not UTF-8')


def test_a_nul_byte_names_its_offset_and_field() -> None:
    line = _raw_message(b"a\x00b", 1)
    offset = line.index(b"\x00")
    assert decode_line(line) == Refused(
        f'"content" holds a NUL byte (0x00) at offset {offset} of the line, which PostgreSQL '
        "text cannot hold"
    )
    assert decode_line(b'{"a": 1}\x00') == Refused(
        "the line holds a NUL byte (0x00) at offset 8 of the line, which PostgreSQL text "
        "cannot hold"
    )
    # The first fault of the line is the one named.
    both = decode_line(b'{"a": "\x00\xff"}')
    assert isinstance(both, Refused) and "NUL byte (0x00) at offset 7" in both.reason
    both = decode_line(b'{"a": "\xff\x00"}')
    assert isinstance(both, Refused) and "not UTF-8: byte 0xff at offset 7" in both.reason


def test_a_json_escape_of_character_zero_is_text_the_reader_lets_through() -> None:
    """`\\u0000` is six characters of valid UTF-8; SQL rejects it (below, end to end)."""
    line = _message("a\u0000b", 1)
    assert b"\\u0000" in line and b"\x00" not in line
    assert decode_line(line) == line.decode()


# --- end to end: the import, in process ---


def _hostile_lines() -> tuple[list[bytes], dict[int, str], list[str]]:
    """The file's lines after the header; the reason expected for each bad line, by line
    number; the contents of the good messages, in order."""
    lines = [
        _thread(),  # line 2
        _message("good one", 1),  # 3
        _raw_message(b"bad \xff byte", 2),  # 4
        _raw_message(b"nul \x00 byte", 3),  # 5
        _padded(_message("long", 4), 20 * MB),  # 6
        b'{"type": "message", "thread": ',  # 7
        _message("char zero \u0000 escaped", 5),  # 8
        b"",  # 9: blank, skipped
        _message("good two", 6),  # 10
    ]
    bad = {
        4: '"content" is not UTF-8: byte 0xff',
        5: '"content" holds a NUL byte (0x00)',
        6: f"the line is {20 * MB} bytes, longer than a line may be ({SMALL_LINE} bytes",
        7: "not JSON",
        8: "not JSON",
    }
    return lines, bad, ["good one", "good two"]


def _assert_reported(rejected: list[tuple[int, str]], bad: dict[int, str]) -> None:
    assert [number for number, _ in rejected] == sorted(bad), "each bad line once, in order"
    for number, reason in rejected:
        assert reason.startswith(bad[number]), (number, reason)


def test_without_partial_every_bad_line_is_reported_and_nothing_written(
    small: str, tmp_path: Path
) -> None:
    lines, bad, _ = _hostile_lines()
    path = _file(tmp_path / "hostile.jsonl", *lines)
    with psycopg.connect(small) as conn:
        result = _imported(conn, path, partial=False)
    assert not result.written
    _assert_reported(result.rejected, bad)
    assert _contents(small) == []


def test_with_partial_the_good_lines_are_written_and_each_bad_one_reported(
    small: str, tmp_path: Path
) -> None:
    lines, bad, good = _hostile_lines()
    path = _file(tmp_path / "hostile.jsonl", *lines)
    with psycopg.connect(small) as conn:
        result = _imported(conn, path, partial=True)
    assert result.written and (result.threads, result.messages) == (1, 2)
    _assert_reported(result.rejected, bad)
    assert _contents(small) == good


def test_a_message_of_a_thread_refused_while_reading_is_rejected_too(
    small: str, tmp_path: Path
) -> None:
    thread = _thread("t@").replace(b"t@", b"t\xe9")  # its id in Latin-1, not UTF-8
    path = _file(tmp_path / "t.jsonl", thread, _message("orphan", 1, tid="t\xe9"))
    with psycopg.connect(small) as conn:
        result = _imported(conn, path, partial=True)
    assert [number for number, _ in result.rejected] == [2, 3]
    assert result.rejected[0][1].startswith('"id" is not UTF-8: byte 0xe9')
    assert result.rejected[1][1] == 'unknown thread "t\xe9"'
    assert _contents(small) == []


def test_a_line_of_exactly_the_bound_is_imported_and_one_byte_more_is_refused(
    small: str, tmp_path: Path
) -> None:
    """The bound holds a message whose content is max_message_bytes: a record at the limit,
    padded with JSON whitespace to the longest line, is imported; a byte more is refused."""
    at_limit = _message("x" * SMALL, 1)
    over = _message("y" * SMALL, 2)
    path = _file(tmp_path / "edge.jsonl", _thread(), _padded(at_limit, SMALL_LINE),
                 _padded(over, SMALL_LINE + 1))  # fmt: skip
    with psycopg.connect(small) as conn:
        result = _imported(conn, path, partial=True)
    assert result.rejected == [
        (4, f"the line is {SMALL_LINE + 1} bytes, longer than a line may be ({SMALL_LINE} "
            "bytes, from the setting max_message_bytes)")
    ]  # fmt: skip
    assert _contents(small) == ["x" * SMALL]


def test_importing_a_line_far_over_the_bound_holds_no_more_than_a_bounded_part_of_it(
    small: str, tmp_path: Path
) -> None:
    size = 20 * MB
    path = _file(tmp_path / "big.jsonl", _thread(), _padded(_message("big", 1), size),
                 _message("after", 2))  # fmt: skip
    with psycopg.connect(small) as conn:
        tracemalloc.start()
        try:
            result = _imported(conn, path, partial=True)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert [number for number, _ in result.rejected] == [3]
    assert result.rejected[0][1].startswith(f"the line is {size} bytes")
    assert _contents(small) == ["after"]
    # A chunk or two of the file (1 MiB each) and the longest line it may hold (70 KiB), with
    # room to spare: far below the line itself (20 MiB), which reading it whole would hold.
    assert peak < 8 * MB, f"the import held {peak} bytes while reading a {size}-byte line"


def test_a_header_that_is_not_utf8_is_refused_at_line_1(small: str, tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"format":"ember","version":1,"note":"caf\xe9"}\n' + _thread() + b"\n")
    with (
        psycopg.connect(small) as conn,
        pytest.raises(ImportFileError, match=r"^line 1: \"note\" is not UTF-8: byte 0xe9"),
    ):
        _imported(conn, path, partial=True)
    REFUSED["lines"] += 1


def test_a_header_longer_than_a_line_may_be_is_refused_at_line_1(
    small: str, tmp_path: Path
) -> None:
    path = tmp_path / "wide.jsonl"
    path.write_bytes(_padded(HEADER, 200_000) + b"\n")
    with (
        psycopg.connect(small) as conn,
        pytest.raises(ImportFileError, match=r"^line 1: the line is 200000 bytes"),
    ):
        _imported(conn, path, partial=False)
    REFUSED["lines"] += 1


# --- end to end: the command, in a process of its own ---


def test_the_command_names_every_refused_line_and_exits_10(small: str, tmp_path: Path) -> None:
    lines, bad, good = _hostile_lines()
    path = _file(tmp_path / "hostile.jsonl", *lines)

    whole = _cli(small, path)
    assert whole.returncode == 10, whole.stderr
    assert "unexpected error" not in whole.stderr
    reported = whole.stderr.splitlines()
    assert len(reported) == len(bad) + 1
    for (number, reason), text in zip(sorted(bad.items()), reported, strict=False):
        assert text.startswith(f"{path}:{number}: {reason}"), text
    assert reported[-1] == (
        f"ember import: {len(bad)} line(s) rejected; nothing imported "
        "(--partial imports the valid lines)"
    )
    assert whole.stdout == "" and _contents(small) == []

    partial = _cli(small, path, "--partial")
    assert partial.returncode == 10, partial.stderr
    assert partial.stderr.splitlines() == reported[:-1], "the same lines, once each"
    assert partial.stdout.strip() == (
        "imported 1 threads, 0 generations, 2 messages (already present: 0 threads, "
        f"0 generations, 0 messages; {len(bad)} lines rejected)"
    )
    assert _contents(small) == good


def test_the_command_lists_the_first_thousand_rejected_lines_and_counts_the_rest(
    small: str, tmp_path: Path
) -> None:
    path = _file(tmp_path / "many.jsonl", _thread(), *([b"\xff"] * 1005))
    done = _cli(small, path, "--partial")
    assert done.returncode == 10
    listed = done.stderr.splitlines()
    assert len(listed) == 1001
    assert listed[0] == f"{path}:3: not UTF-8: byte 0xff at offset 0 of the line " + (
        "(invalid start byte)"
    )
    assert listed[999].startswith(f"{path}:1002: ")
    assert listed[1000] == (
        f"ember import: {path}: 5 more line(s) rejected, not listed (the first 1000 are)"
    )
    assert "1005 lines rejected" in done.stdout


# --- what the reader leaves to SQL ---


def test_content_over_max_message_bytes_is_a_rejected_line_under_partial(
    small: str, tmp_path: Path
) -> None:
    """A line within the line bound whose content is over max_message_bytes is SQL's to
    reject (the content's length is known only once the line is parsed), by its line."""
    path = _file(tmp_path / "over.jsonl", _thread(), _message("x" * (SMALL + 1), 1),
                 _message("fine", 2), b"oops")  # fmt: skip
    with psycopg.connect(small) as conn:
        result = _imported(conn, path, partial=True)
    assert [number for number, _ in result.rejected] == [3, 5]
    assert _contents(small) == ["fine"]
