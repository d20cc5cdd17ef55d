"""Every SQL statement the Python side runs, in one reviewable place.

The rules live in SQL functions (functions/*.sql); these statements only call them, or manage
the migration bookkeeping that has to exist before any function does.
"""

from __future__ import annotations

from typing import LiteralString

# hashtext('ember.migrate'): a fixed key shared by every migrating process.
MIGRATE_LOCK: LiteralString = "SELECT pg_advisory_lock(hashtext('ember.migrate'))"
MIGRATE_UNLOCK: LiteralString = "SELECT pg_advisory_unlock(hashtext('ember.migrate'))"

MIGRATE_BOOTSTRAP: LiteralString = """
CREATE SCHEMA IF NOT EXISTS ember;
CREATE TABLE IF NOT EXISTS ember.schema_migrations (
    name text PRIMARY KEY,
    sha256 text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""

APPLIED_MIGRATIONS: LiteralString = "SELECT name, sha256 FROM ember.schema_migrations"

RECORD_MIGRATION: LiteralString = (
    "INSERT INTO ember.schema_migrations (name, sha256) VALUES (%s, %s)"
)

DATABASE_EXISTS: LiteralString = "SELECT 1 FROM pg_database WHERE datname = %s"

# --- control plane (functions/070_identity.sql, 071_events.sql, 072_side_chat.sql) ---

TURN_IDENTITY: LiteralString = "SELECT ember.turn_identity(%s, %s::jsonb)"

IDENTITY_FILES: LiteralString = "SELECT ember.identity_files(kind) FROM ember.threads WHERE id = %s"

THREAD_TOOLS: LiteralString = "SELECT name, availability, file_tool FROM ember.thread_tools(%s)"

TOOL_REGISTRY: LiteralString = """
SELECT name, kinds, availability, file_tool, offered_isolated, description
FROM ember.tools ORDER BY position
"""

REGISTER_TOOL: LiteralString = "SELECT ember.register_tool(%s, %s, %s, %s, %s, %s)"

SIDE_CHAT_MESSAGE: LiteralString = "SELECT ember.side_chat_message(%s, %s, %s, %s)"

SIDE_CHAT_INSPECT: LiteralString = "SELECT ember.side_chat_inspect(%s)"

REPORT_PROGRESS: LiteralString = "SELECT ember.report_progress(%s, %s, %s)"

QUEUE_EVENT: LiteralString = "SELECT ember.queue_event(%s, %s, %s, %s, %s)"

DELIVERABLE_EVENTS: LiteralString = """
SELECT event_id, message_id, source, kind, from_thread, author, content, created_at
FROM ember.deliverable_events(%s, %s)
"""

PROGRESS_BOARD: LiteralString = """
SELECT thread_id, title, kind, status, running, event_id, report, reported_at, delivered
FROM ember.progress_board()
"""

# --- comparison ---

# The candidates of a window, isolated threads already removed in SQL (semantic_candidates).
SEMANTIC_CANDIDATES: LiteralString = (
    "SELECT side, item_id, thread_id, text, categories FROM ember.semantic_candidates(%s, %s)"
)
ROUTE_LIGHT_MODEL: LiteralString = "SELECT ember.route_model('light', %s::text[])"
SEMANTIC_SHORTLIST: LiteralString = (
    "SELECT ember.semantic_shortlist(%s::bigint[], %s::bigint[], %s)"
)
SUBMIT_JUDGE_RUN: LiteralString = "SELECT ember.submit_judge_run(%s)"

# The report: the analyst's views, windowed. Each returns rows as dicts.
COMPARISON_SUMMARY: LiteralString = "SELECT * FROM ember.comparison_summary(%s, %s)"
COMPARISON_COST: LiteralString = "SELECT * FROM ember.comparison_cost(%s, %s)"
COMPARISON_LATENCY: LiteralString = "SELECT * FROM ember.comparison_latency(%s, %s)"
COMPARISON_EVIDENCE_QUALITY: LiteralString = """
SELECT source, evidence_kind, coalesce(problem, 'ok') AS problem, count(*) AS pointers
FROM ember.comparison_evidence_quality(%s, %s)
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3
"""
COMPARISON_DAILY: LiteralString = "SELECT * FROM ember.comparison_daily(%s, %s)"
