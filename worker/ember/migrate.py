"""Two-tier migrations: versioned files applied once, then idempotent functions re-applied.

`db/migrations/NNNN_name.sql` holds tables, types and indexes. Each is applied once, in its own
transaction, and recorded with its sha256; an applied file whose bytes changed stops the run
with its name, because silently diverging schemas are worse than a failed deploy.
`functions/*.sql` holds CREATE OR REPLACE definitions, re-applied in filename order on every
run in one transaction, so a broken function file leaves the previous definitions in place.
A transaction-independent advisory lock serializes concurrent migrates.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from ember import queries

MIGRATION_NAME = re.compile(r"^\d{4}_[a-z0-9_]+\.sql$")


class MigrationError(RuntimeError):
    pass


@dataclass
class MigrateResult:
    applied: list[str] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def migration_files(root: Path) -> list[Path]:
    files = sorted((root / "db" / "migrations").glob("*.sql"))
    for path in files:
        if not MIGRATION_NAME.match(path.name):
            raise MigrationError(f"{path}: migration names must look like NNNN_name.sql")
    return files


def function_files(root: Path) -> list[Path]:
    return sorted((root / "functions").glob("*.sql"))


def migrate(url: str, root: Path) -> MigrateResult:
    result = MigrateResult()
    migrations = migration_files(root)
    functions = function_files(root)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(queries.MIGRATE_LOCK)
        try:
            conn.execute(queries.MIGRATE_BOOTSTRAP)
            applied: dict[str, str] = dict(conn.execute(queries.APPLIED_MIGRATIONS).fetchall())
            for path in migrations:
                digest = _sha256(path)
                if path.name in applied:
                    if applied[path.name] != digest:
                        raise MigrationError(
                            f"{path.relative_to(root)} was edited after it was applied "
                            f"(recorded sha256 {applied[path.name][:12]}…, file now "
                            f"{digest[:12]}…); add a new migration instead of editing this one"
                        )
                    continue
                with conn.transaction():
                    try:
                        conn.execute(path.read_text())
                    except psycopg.Error as exc:
                        raise MigrationError(f"{path.relative_to(root)}: {exc}") from exc
                    conn.execute(queries.RECORD_MIGRATION, (path.name, digest))
                result.applied.append(path.name)
            with conn.transaction():
                for path in functions:
                    try:
                        conn.execute(path.read_text())
                    except psycopg.Error as exc:
                        raise MigrationError(f"{path.relative_to(root)}: {exc}") from exc
                    result.functions.append(path.name)
        finally:
            conn.execute(queries.MIGRATE_UNLOCK)
    return result
