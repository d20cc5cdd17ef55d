"""`ember import` and `ember export`: threads, generations and messages as versioned JSONL.

The format is described in docs/import-format.md. Python reads the file in bounded chunks,
refuses what PostgreSQL text cannot hold (a line that is not UTF-8, holds a NUL byte, or is
longer than a line may be), checks the header and streams the other lines into a staging table
with COPY; every rule (what a valid record is, what is already stored, what may be written) is
decided in SQL by ember.import_staged(), in one transaction.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

import psycopg
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from ember import queries

FORMAT = "ember"
VERSION = 1

# Field order of each record type as export writes it (and as the docs list it).
FIELDS: dict[str, tuple[str, ...]] = {
    "thread": (
        "type", "id", "kind", "title", "category", "seal_tier", "model", "status", "created_at",
    ),
    "generation": ("type", "thread", "ordinal", "started_at", "ended_at"),
    "message": (
        "type", "thread", "generation", "role", "author", "content", "blocks",
        "tool_call_id", "tool_name", "tool_status", "from_thread", "created_at",
    ),
}  # fmt: skip


# The longest line a file may hold, from the setting max_message_bytes (M): 6 * M + 64 KiB, not
# counting the newline. Six bytes a byte is the widest JSON can write content of M bytes (every
# byte a control character written as \u00XX); 64 KiB holds the rest of the record (ids and names
# are at most max_key_chars, times are short) and blocks that repeat the text. A tighter bound
# would refuse, as too long, lines that SQL accepts; a line over it cannot be held whole, and
# is refused while it is read, without being kept.
LINE_BYTES_PER_CONTENT_BYTE = 6
LINE_ENVELOPE_BYTES = 64 * 1024
# How much of the file is read at a time: together with the line bound, what reading holds.
READ_CHUNK_BYTES = 1 << 20
# A line refused while reading is staged as this instead, which SQL rejects ("not a JSON object"):
# the file then counts it as rejected for all-or-nothing and for the lines that depend on it, and
# its reason is replaced by the one given while reading.
REFUSED_STAND_IN = "null"


def line_limit(max_message_bytes: int) -> int:
    """The longest line, in bytes without its newline, that a file may hold."""
    return LINE_BYTES_PER_CONTENT_BYTE * max_message_bytes + LINE_ENVELOPE_BYTES


@dataclass(frozen=True)
class Refused:
    """A line refused while it was read: why, already phrased for `FILE:line: reason`."""

    reason: str


class Readable(Protocol):
    """What LineReader reads from: a file opened "rb", or any stream of bytes."""

    def read(self, size: int, /) -> bytes: ...


class LineReader:
    """The lines of a binary stream, numbered from 1: each `(number, text)` with its newline
    removed, or `(number, Refused)` for a line that is longer than `limit` bytes, not UTF-8, or
    holds a NUL byte. The stream is read `chunk_size` bytes at a time, and no more than `limit`
    bytes of one line are ever kept: a line that passes the limit is dropped and skipped to its
    newline, counted but not held. `most_held` is the most bytes of one line kept at once."""

    def __init__(self, stream: Readable, limit: int, *, chunk_size: int = READ_CHUNK_BYTES):
        if limit < 0 or chunk_size < 1:
            raise ValueError("a line limit >= 0 and a chunk size >= 1")
        self.stream = stream
        self.limit = limit
        self.chunk_size = chunk_size
        self.most_held = 0

    def __iter__(self) -> Iterator[tuple[int, str | Refused]]:
        for number, line in self._raw():
            yield number, line if isinstance(line, Refused) else decode_line(line)

    def _too_long(self, length: int) -> Refused:
        return Refused(
            f"the line is {length} bytes, longer than a line may be ({self.limit} bytes, "
            "from the setting max_message_bytes)"
        )

    def _raw(self) -> Iterator[tuple[int, bytes | Refused]]:
        number = 1
        held = bytearray()  # the start of the current line, never more than `limit` bytes
        skipped = 0  # the length so far of an over-long line being skipped, else 0
        while chunk := self.stream.read(self.chunk_size):
            *ends, rest = chunk.split(b"\n")
            for end in ends:
                length = skipped + len(held) + len(end)
                if skipped or length > self.limit:
                    yield number, self._too_long(length)
                else:
                    yield number, bytes(held) + end if held else end
                held.clear()
                skipped = 0
                number += 1
            if skipped:
                skipped += len(rest)
            elif len(held) + len(rest) > self.limit:
                skipped = len(held) + len(rest)
                held.clear()
            else:
                held += rest
                self.most_held = max(self.most_held, len(held))
        if skipped:
            yield number, self._too_long(skipped)
        elif held:
            yield number, bytes(held)


def decode_line(raw: bytes) -> str | Refused:
    """A line's text, or why PostgreSQL text cannot hold it: not UTF-8, or a NUL byte in it
    (the first of the two in the line). The offset is the byte's, from 0 at the line's start."""
    nul = raw.find(b"\0")
    try:
        text = raw.decode("utf-8") if nul < 0 else raw[:nul].decode("utf-8")
    except UnicodeDecodeError as exc:
        where = _field_at(raw[: exc.start].decode("utf-8"))
        return Refused(
            f"{where + ' is ' if where else ''}not UTF-8: byte 0x{raw[exc.start]:02x} at offset "
            f"{exc.start} of the line ({exc.reason})"
        )
    if nul >= 0:
        where = _field_at(text)
        return Refused(
            f"{where + ' holds' if where else 'the line holds'} a NUL byte (0x00) at offset "
            f"{nul} of the line, which PostgreSQL text cannot hold"
        )
    return text


# One JSON token: a whole string, a structural character, or a run of anything else (numbers,
# literals, whitespace). Possessive, so that a long string is one step and never backtracks.
_TOKEN = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"|[{}\[\]:,]|[^"{}\[\]:,]++', re.DOTALL)


def _field_at(prefix: str) -> str | None:
    """Where in a record the end of `prefix` lies: '"name"' within the value of its top-level
    field `name`, 'a field name' within a key, or None elsewhere (or when it is not a record).
    A scan of the tokens rather than a parse: the line is, by the time this is asked, no JSON a
    parser would read, and the bytes before the fault are all there is to go on."""
    depth, record, key, in_value, pos = 0, False, "", False, 0
    while pos < len(prefix):
        token = _TOKEN.match(prefix, pos)
        if token is None:  # a string left open: the end of the prefix is inside it
            if record and depth == 1 and not in_value:
                return "a field name"
            break
        text, pos = token.group(), token.end()
        if text in ("{", "["):
            record = record or (depth == 0 and text == "{")
            depth += 1
        elif text in ("}", "]"):
            depth -= 1
            in_value = in_value and depth >= 1
        elif depth != 1:
            continue
        elif text == ":":
            in_value = True
        elif text == ",":
            key, in_value = "", False
        elif text.startswith('"') and not in_value:
            key = text
    return _field(key) if record and in_value and depth >= 1 else None


def _field(key: str) -> str | None:
    """A field's name as the reasons write it: quoted, escaped, at most 64 characters."""
    if not key:
        return None
    try:
        name = str(json.loads(key, strict=False))
    except ValueError:
        name = key[1:-1]
    if len(name) > 64:
        name = name[:64] + "..."
    return json.dumps(name, ensure_ascii=False)


class ImportFileError(Exception):
    """The file as a whole is not an import file this version reads (names line 1)."""


@dataclass
class ImportResult:
    written: bool
    threads: int = 0
    generations: int = 0
    messages: int = 0
    present: int = 0
    threads_present: int = 0
    generations_present: int = 0
    rejected: list[tuple[int, str]] = field(default_factory=list)
    # Stored open threads the file isolates, sealed before anything was written into them.
    sealed: list[str] = field(default_factory=list)
    # Answered from the record of an earlier import of the same file (nothing was read).
    known: bool = False


def header_line() -> str:
    return format_record({"format": FORMAT, "version": VERSION})


def format_record(record: dict[str, Any]) -> str:
    """One record as one line: fields in the documented order, compact, UTF-8 kept."""
    order = FIELDS.get(str(record.get("type")))
    if order is not None:
        record = {key: record.get(key) for key in order}
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def check_header(line: str | None) -> None:
    hint = f"the first line must be the header {header_line()}"
    if line is None or not line.strip():
        raise ImportFileError(f"line 1: the file is empty; {hint}")
    try:
        header = json.loads(line)
    except json.JSONDecodeError:
        raise ImportFileError(f"line 1: not JSON, so not an Ember JSONL file; {hint}") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ImportFileError(f"line 1: not an Ember import header; {hint}")
    if header.get("version") != VERSION:
        raise ImportFileError(
            f"line 1: unknown format version {json.dumps(header.get('version'))} "
            f"(this Ember reads version {VERSION})"
        )


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeRemainingColumn(),
        disable=not enabled,
        transient=True,
    )


def file_digest(path: Path) -> str:
    """SHA-256 of the file's bytes, hex: how an import recognises a file it has taken before."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _result(outcome: dict[str, Any]) -> ImportResult:
    return ImportResult(
        written=bool(outcome["written"]),
        threads=int(outcome["threads"]),
        generations=int(outcome["generations"]),
        messages=int(outcome["messages"]),
        present=int(outcome["present"]),
        threads_present=int(outcome.get("threads_present", 0)),
        generations_present=int(outcome.get("generations_present", 0)),
        rejected=[(int(r["line"]), str(r["reason"])) for r in outcome["rejected"]],
        sealed=[str(t) for t in outcome.get("sealed") or []],
        known=bool(outcome.get("known", False)),
    )


def _with_refused(result: ImportResult, refused: dict[int, str]) -> ImportResult:
    """The lines refused while reading, with the reasons given then, among SQL's rejections
    (where their stand-ins are rejected as "not a JSON object"), in line order."""
    if refused:
        reasons = dict(result.rejected)
        reasons.update(refused)
        result.rejected = sorted(reasons.items())
    return result


def import_file(
    conn: psycopg.Connection[Any], path: Path, *, partial: bool, progress: bool | None = None
) -> ImportResult:
    """Import one file in one transaction; nothing is written when a line is rejected, unless
    `partial`, in which case only the accepted lines are. A file imported whole before, whose
    threads are as that import left them, is answered without being read."""
    show = sys.stderr.isatty() if progress is None else progress
    size = path.stat().st_size
    digest = file_digest(path)
    with path.open("rb") as handle, conn.transaction():
        limit_row = conn.execute(queries.IMPORT_MESSAGE_LIMIT).fetchone()
        assert limit_row is not None
        lines = iter(LineReader(handle, line_limit(int(limit_row[0]))))
        _number, header = next(lines, (1, None))
        if isinstance(header, Refused):
            raise ImportFileError(f"line 1: {header.reason}")
        check_header(header)
        known = conn.execute(queries.IMPORT_KNOWN, {"digest": digest}).fetchone()
        if known is not None and known[0] is not None:
            return _result(known[0])
        conn.execute(queries.IMPORT_STAGE)
        refused: dict[int, str] = {}
        with _progress(show) as bar, conn.cursor() as cur:
            task = bar.add_task("reading", total=size)
            with cur.copy(queries.IMPORT_COPY) as copy:
                for number, line in lines:
                    if isinstance(line, Refused):
                        refused[number] = line.reason
                        copy.write_row((number, REFUSED_STAND_IN))
                    elif line.strip() != "":  # a blank line: no record, skipped, not rejected
                        copy.write_row((number, line))
                    if number % 5000 == 0:
                        bar.update(task, completed=handle.tell())
            bar.update(task, completed=size, description="checking and writing")
            row = cur.execute(
                queries.IMPORT_APPLY, {"partial": partial, "digest": digest}
            ).fetchone()
        assert row is not None
        result = _with_refused(_result(row[0]), refused)
        if refused and result.written and not partial:
            # The stand-ins are rejected lines to SQL, so this is not reached; were it reached,
            # leaving the transaction by an exception undoes what was written.
            raise RuntimeError("a file with lines refused while reading was written whole")
        if not result.written:
            # Nothing was written by import_staged; roll back the staging table as well.
            raise _Rollback(result)
    if result.threads or result.generations or result.messages:
        # Fresh statistics for what was loaded: until autovacuum gets round to it, a planner
        # that believes the tables empty picks plans that cost seconds on the claims.
        with conn.transaction():
            conn.execute(queries.IMPORT_ANALYZE)
    return result


class _Rollback(Exception):
    def __init__(self, result: ImportResult) -> None:
        super().__init__("import rejected")
        self.result = result


def run_import(
    conn: psycopg.Connection[Any], path: Path, *, partial: bool, progress: bool | None = None
) -> ImportResult:
    try:
        return import_file(conn, path, partial=partial, progress=progress)
    except _Rollback as rollback:
        return rollback.result


def export_records(conn: psycopg.Connection[Any]) -> Iterable[dict[str, Any]]:
    with conn.cursor(name="ember_export") as cur:
        cur.itersize = 5000
        cur.execute(queries.EXPORT_RECORDS)
        for (record,) in cur:
            yield record


def export_to(conn: psycopg.Connection[Any], out: IO[str]) -> int:
    """Write the whole export to `out`; returns the number of records."""
    out.write(header_line() + "\n")
    count = 0
    with conn.transaction():
        for record in export_records(conn):
            out.write(format_record(record) + "\n")
            count += 1
    return count
