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
