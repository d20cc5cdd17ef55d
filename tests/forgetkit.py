"""Helpers for the forgetting tests: a search of every column for a marker, and small fixtures."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

# Every column that can hold text in some form: text, json, jsonb, arrays, tsvector, vectors.
_COLUMNS = """
SELECT c.relname, a.attname
FROM pg_attribute AS a
JOIN pg_class AS c ON c.oid = a.attrelid
JOIN pg_type AS t ON t.oid = a.atttypid
WHERE c.relnamespace = 'ember'::regnamespace AND c.relkind IN ('r', 'p', 'm')
    AND a.attnum > 0 AND NOT a.attisdropped
    AND (t.typname IN ('text', 'varchar', 'bpchar', 'json', 'jsonb', 'tsvector', 'vector', '_text')
         OR t.typcategory = 'S')
ORDER BY 1, 2
"""


def marker_hits(conn: psycopg.Connection[Any], marker: str) -> dict[str, int]:
    """{"table.column": rows holding the marker} over every such column of schema ember."""
    hits: dict[str, int] = {}
    for table, column in conn.execute(_COLUMNS).fetchall():
        query = sql.SQL("SELECT count(*) FROM ember.{} WHERE {}::text ILIKE %s").format(
            sql.Identifier(table), sql.Identifier(column)
        )
        row = conn.execute(query, (f"%{marker}%",)).fetchone()
        if row and row[0]:
            hits[f"{table}.{column}"] = int(row[0])
    return hits


def insert_fact(conn: psycopg.Connection[Any], text: str, kind: str, message_ids: list[int]) -> int:
    """A fact and its pointers, inserted as the steward's write_fact inserts them."""
    row = conn.execute(
        "INSERT INTO ember.facts (text, evidence_kind) VALUES (%s, %s) RETURNING id", (text, kind)
    ).fetchone()
    assert row is not None
    fact = int(row[0])
    for ordinal, message in enumerate(message_ids, start=1):
        conn.execute(
            "INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id) VALUES (%s, %s, %s)",
            (fact, ordinal, message),
        )
    return fact


def append(conn: psycopg.Connection[Any], thread: str, role: str, content: str) -> int:
    row = conn.execute(
        "SELECT ember.append_message('default', %s, %s, %s)", (thread, role, content)
    ).fetchone()
    assert row is not None
    return int(row[0])
