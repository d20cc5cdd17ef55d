"""`ember export --facts`: every fact with its evidence pointers and history, as versioned JSONL.

The same family as the thread export (docs/import-format.md): a header line naming the format
and its version, then one compact JSON record per line. The records are built in SQL
(ember.export_fact_records()); this module writes and reads them. docs/export-facts.md
describes the fields.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

import psycopg

from ember import queries

FORMAT = "ember-facts"
VERSION = 1

# Field order of a fact record as written (and as the docs list it).
FACT_FIELDS: tuple[str, ...] = (
    "type", "id", "text", "status", "evidence_kind", "categories", "merged_into",
    "retired_reason", "run", "created_at", "updated_at", "evidence", "history",
)  # fmt: skip


class FactsFileError(Exception):
    """The file is not a facts export this version reads (the message names the line)."""


def header_line() -> str:
    return json.dumps({"format": FORMAT, "version": VERSION}, separators=(",", ":"))


def format_record(record: dict[str, Any]) -> str:
    """One fact as one line: fields in the documented order, compact, UTF-8 kept."""
    ordered = {key: record.get(key) for key in FACT_FIELDS}
    return json.dumps(ordered, ensure_ascii=False, separators=(",", ":"))


def fact_records(conn: psycopg.Connection[Any]) -> Iterator[dict[str, Any]]:
    """The records in file order, read in one snapshot."""
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        cur.execute(queries.EXPORT_FACT_RECORDS)
        for (record,) in cur:
            yield dict(record)


def export_facts_to(conn: psycopg.Connection[Any], out: IO[str]) -> int:
    """Write the header and every fact; returns the number of facts written."""
    out.write(header_line() + "\n")
    count = 0
    for record in fact_records(conn):
        out.write(format_record(record) + "\n")
        count += 1
    return count


def read_facts(handle: IO[str]) -> list[dict[str, Any]]:
    """Read a facts export back: checks the header, then returns the records in order."""
    lines = iter(handle)
    first = next(lines, None)
    hint = f"the first line must be the header {header_line()}"
    try:
        header = json.loads(first) if first and first.strip() else None
    except json.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise FactsFileError(f"line 1: not a facts export; {hint}")
    if header.get("version") != VERSION:
        raise FactsFileError(
            f"line 1: unknown format version {json.dumps(header.get('version'))} "
            f"(this Ember reads version {VERSION})"
        )
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=2):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FactsFileError(f"line {number}: not JSON ({exc.msg})") from exc
        if not isinstance(record, dict) or record.get("type") != "fact":
            raise FactsFileError(f'line {number}: expected a record with "type": "fact"')
        records.append(record)
    return records
