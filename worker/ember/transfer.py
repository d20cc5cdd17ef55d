"""`ember import` and `ember export`: threads, generations and messages as versioned JSONL.

The format is described in docs/import-format.md. Python reads the header and streams the
other lines into a staging table with COPY; every rule (what a valid record is, what is already
stored, what may be written) is decided in SQL by ember.import_staged(), in one transaction.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

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


def _lines(handle: IO[str]) -> Iterator[str]:
    for raw in handle:
        yield raw[:-1] if raw.endswith("\n") else raw


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
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


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
        known=bool(outcome.get("known", False)),
    )


def import_file(
    conn: psycopg.Connection[Any], path: Path, *, partial: bool, progress: bool | None = None
) -> ImportResult:
    """Import one file in one transaction; nothing is written when a line is rejected, unless
    `partial`, in which case only the accepted lines are. A file imported whole before, whose
    threads are as that import left them, is answered without being read."""
    show = sys.stderr.isatty() if progress is None else progress
    size = path.stat().st_size
    digest = file_digest(path)
    with path.open(encoding="utf-8", newline="\n") as handle, conn.transaction():
        lines = _lines(handle)
        check_header(next(lines, None))
        known = conn.execute(queries.IMPORT_KNOWN, {"digest": digest}).fetchone()
        if known is not None and known[0] is not None:
            return _result(known[0])
        conn.execute(queries.IMPORT_STAGE)
        with _progress(show) as bar, conn.cursor() as cur:
            task = bar.add_task("reading", total=size)
            done = 0
            with cur.copy(queries.IMPORT_COPY) as copy:
                for number, line in enumerate(lines, start=2):
                    done += len(line) + 1  # characters: close enough to bytes for a bar
                    if line.strip() == "":
                        # A blank line carries no record; it is skipped, not rejected.
                        continue
                    copy.write_row((number, line))
                    if number % 5000 == 0:
                        bar.update(task, completed=done)
            bar.update(task, completed=size, description="checking and writing")
            row = cur.execute(
                queries.IMPORT_APPLY, {"partial": partial, "digest": digest}
            ).fetchone()
        assert row is not None
        result = _result(row[0])
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
