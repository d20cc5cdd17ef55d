"""Two-tier migrations: versioned files applied once, then idempotent functions re-applied.

`db/migrations/NNNN_name.sql` holds tables, types and indexes. Each is applied once, in its own
transaction, and recorded with its sha256; an applied file whose bytes changed stops the run
with its name, because silently diverging schemas are worse than a failed deploy.
`functions/*.sql` holds CREATE OR REPLACE definitions, re-applied in filename order on every
run in one transaction, so a broken function file leaves the previous definitions in place; the
digest of the whole set is recorded so a worker can tell the database's functions are its own.
A transaction-independent advisory lock serializes concurrent migrates.

The SQL ships inside the package (`ember/sql/`, copied there by setup.py when a wheel is built),
so an installed `ember migrate` needs no checkout; an editable install reads the checkout.
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


@dataclass
class MigrationStatus:
    """The database's migrations against a tree of SQL files."""

    applied: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)
    # Applied in the database but absent from the files: the database is newer than this package.
    unknown: list[str] = field(default_factory=list)
    functions_current: bool = False
    functions: list[str] = field(default_factory=list)

    @property
    def current(self) -> bool:
        return not (self.pending or self.edited or self.unknown) and self.functions_current


def sql_root() -> Path:
    """Where this installation's own db/ and functions/ live."""
    here = Path(__file__).resolve().parent
    packaged = here / "sql"
    if (packaged / "db" / "migrations").is_dir():
        return packaged
    checkout = here.parents[1]
    if (checkout / "db" / "migrations").is_dir() and (checkout / "functions").is_dir():
        return checkout
    raise MigrationError(
        f"no SQL files found in {packaged} or {checkout}: reinstall the ember package"
    )


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


def functions_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in function_files(root):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _edited_message(path: Path, root: Path, recorded: str, now: str) -> str:
    return (
        f"{path.relative_to(root)} was edited after it was applied "
        f"(recorded sha256 {recorded[:12]}…, file now {now[:12]}…); "
        "add a new migration instead of editing this one"
    )


def migrate(url: str, root: Path, tenant: str | None = None) -> MigrateResult:
    """Apply new migrations, then every function file. `tenant` names the tenant that the rows of
    a database migrated before tenants become (db/migrations/0051_tenants.sql; `default` when
    None); on a database that has tenants already it must be one of them."""
    result = MigrateResult()
    migrations = migration_files(root)
    functions = function_files(root)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(queries.MIGRATE_LOCK)
        try:
            if tenant is not None:
                conn.execute(queries.SET_MIGRATE_TENANT, {"tenant": tenant})
            conn.execute(queries.MIGRATE_BOOTSTRAP)
            applied: dict[str, str] = dict(conn.execute(queries.APPLIED_MIGRATIONS).fetchall())
            for path in migrations:
                digest = _sha256(path)
                if path.name in applied:
                    if applied[path.name] != digest:
                        raise MigrationError(
                            _edited_message(path, root, applied[path.name], digest)
                        )
                    continue
                with conn.transaction():
                    try:
                        conn.execute(path.read_text())
                    except psycopg.Error as exc:
                        raise MigrationError(f"{path.relative_to(root)}: {exc}") from exc
                    conn.execute(queries.RECORD_MIGRATION, {"name": path.name, "sha256": digest})
                result.applied.append(path.name)
            with conn.transaction():
                for path in functions:
                    try:
                        conn.execute(path.read_text())
                    except psycopg.Error as exc:
                        raise MigrationError(f"{path.relative_to(root)}: {exc}") from exc
                    result.functions.append(path.name)
                conn.execute(queries.RECORD_FUNCTIONS, {"sha256": functions_digest(root)})
            if (
                tenant is not None
                and not conn.execute(queries.TENANT_EXISTS, {"tenant": tenant}).fetchone()
            ):
                raise MigrationError(
                    f"--tenant {tenant}: this database's rows already belong to other tenants; "
                    "--tenant names the tenant of the rows of an upgrade from before tenants"
                )
        finally:
            conn.execute(queries.MIGRATE_UNLOCK)
    return result


def status(url: str, root: Path) -> MigrationStatus:
    """Compare the database with the files; read-only, and creates nothing."""
    out = MigrationStatus(functions=[p.name for p in function_files(root)])
    migrations = migration_files(root)
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(queries.MIGRATIONS_TABLE_EXISTS).fetchone()
        has_migrations, has_functions, has_state = row if row else (False, False, False)
        applied: dict[str, str] = {}
        recorded: tuple[str] | None = None
        if has_state:
            # The function any Ember role may call: the roles read no table.
            for kind, name, sha in conn.execute(queries.SCHEMA_STATE).fetchall():
                if kind == "migration":
                    applied[name] = sha
                else:
                    recorded = (sha,)
        else:
            if has_migrations:
                applied = dict(conn.execute(queries.APPLIED_MIGRATIONS).fetchall())
            if has_functions:
                recorded = conn.execute(queries.APPLIED_FUNCTIONS).fetchone()
    names = {p.name for p in migrations}
    for path in migrations:
        if path.name not in applied:
            out.pending.append(path.name)
        elif applied[path.name] != _sha256(path):
            out.edited.append(path.name)
        else:
            out.applied.append(path.name)
    out.unknown = sorted(set(applied) - names)
    out.functions_current = recorded is not None and recorded[0] == functions_digest(root)
    return out


def _names(items: list[str]) -> str:
    return (
        ", ".join(items) if len(items) <= 3 else f"{', '.join(items[:3])} and {len(items) - 3} more"
    )


def describe_difference(st: MigrationStatus) -> str | None:
    """One line naming how the database differs from the files, or None when it matches."""
    if st.unknown:
        return (
            f"the database has migrations this ember does not know ({_names(st.unknown)}): "
            "upgrade ember to the version that applied them"
        )
    if st.edited:
        return (
            f"applied migrations differ from this ember's files ({_names(st.edited)}): "
            "the database was migrated by another build of ember"
        )
    if st.pending:
        return f"the database lacks migrations {_names(st.pending)}: run `ember migrate`"
    if not st.functions_current:
        return "the database's functions are not this ember's: run `ember migrate`"
    return None


def check_schema_current(url: str, root: Path | None = None) -> str | None:
    """For the worker's start-up: None when the database runs exactly this package's SQL, else
    one line naming the difference and what to do."""
    return describe_difference(status(url, root or sql_root()))
