"""The upgrade to tenants loses nothing (db/migrations/0051_tenants.sql): a database built and
filled by the release before tenants (commit 37d7280's migrations and functions, taken from this
repository's history) is migrated by this tree; every row it held is still there, and every row
of one person's data belongs to the tenant the upgrade named. An interrupted upgrade leaves the
old schema whole and runs again from the start."""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import tarfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ember.migrate import MigrationError, migrate

ROOT = Path(__file__).resolve().parents[1]
BEFORE_TENANTS = "37d7280"

# Rewritten by design: the checksum of functions/ by every migrate, and the park epoch by every
# change of the settings or models, which the migrations after 37d7280 make.
REWRITTEN = {"schema_functions", "shadow_park_epoch"}

TABLES = """
SELECT c.relname FROM pg_class AS c
WHERE c.relnamespace = 'ember'::regnamespace AND c.relkind IN ('r', 'p')
ORDER BY 1
"""


@pytest.fixture(scope="module")
def old_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The migrations, functions and test data helper of the release before tenants, from git
    history."""
    archive = subprocess.run(
        [
            "git",
            "-C",
            str(ROOT),
            "archive",
            "--format=tar",
            BEFORE_TENANTS,
            "db",
            "functions",
            "tests/comparedata.py",
        ],
        capture_output=True,
        check=False,
    )
    assert archive.returncode == 0, (
        f"git archive {BEFORE_TENANTS} failed (the upgrade test needs this repository's "
        f"history): {archive.stderr.decode(errors='replace')}"
    )
    root = tmp_path_factory.mktemp("before-tenants")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(root, filter="data")
    assert not (root / "db" / "migrations" / "0051_tenants.sql").exists()
    return root


def _old_comparedata(root: Path) -> Any:
    """The old release's tests/comparedata.py: it writes through that release's functions."""
    spec = importlib.util.spec_from_file_location(
        "comparedata_before_tenants", root / "tests" / "comparedata.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fill(conn: psycopg.Connection[Any], root: Path) -> None:
    """Rows in most tables, through the old release's own functions and the writes its tests
    make: threads, two generations of main, messages, runs, proposals, facts and evidence,
    steward runs, a sealed thread, the tick's state and offers, a cut-over with its promotions,
    and a forgetting with its history."""
    old = _old_comparedata(root)
    old.seed_case(conn)
    conn.execute("SELECT ember.create_thread('main', 'main', 'the main thread')")
    for n in range(5):
        old.message(conn, "main", f"main line {n}")
    conn.execute("SELECT ember.start_generation('main')")
    old.message(conn, "main", "a line of the second generation")
    conn.execute("SELECT ember.tick(%s::timestamptz + interval '1 hour')", (old.AT,))
    conn.execute("SELECT ember.cut_over('thread', 'deploy', 'the upgrade test')")
    conn.execute("SELECT ember.forget_thread('db', 'the user asked')")


def _rows(conn: psycopg.Connection[Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for (table,) in conn.execute(TABLES).fetchall():
        out[table] = [
            row for (row,) in conn.execute(f"SELECT to_jsonb(t) FROM ember.{table} AS t").fetchall()
        ]
    return out


def _as_before(rows: list[dict[str, Any]], keys: set[str]) -> Counter[str]:
    """Each row cut to the columns the old release had, as a multiset of canonical texts."""
    return Counter(json.dumps({k: r[k] for k in keys}, sort_keys=True) for r in rows)


def _assert_kept(
    before: dict[str, list[dict[str, Any]]], after: dict[str, list[dict[str, Any]]]
) -> None:
    """Every row of every table before is in the table after, cut to the columns it had."""
    for table, old in before.items():
        if table in REWRITTEN or not old:
            continue
        keys = set(old[0])
        missing = _as_before(old, keys) - _as_before(after[table], keys)
        assert not missing, f"ember.{table} lost rows in the upgrade: {list(missing)[:3]}"


def test_upgrade_keeps_every_row_and_names_the_tenant(empty_db: str, old_root: Path) -> None:
    migrate(empty_db, old_root)
    with psycopg.connect(empty_db, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('ember.tenants')").fetchone() == (None,)
        _fill(conn, old_root)
        before = _rows(conn)
    filled = sorted(t for t, rows in before.items() if rows)
    assert len(filled) >= 25, f"the old database is too empty to prove much: {filled}"

    result = migrate(empty_db, ROOT, tenant="acme")
    assert "0051_tenants.sql" in result.applied

    with psycopg.connect(empty_db, autocommit=True) as conn:
        after = _rows(conn)
        tenant_tables = {
            t
            for (t,) in conn.execute(
                "SELECT table_name FROM ember.distribution_plan() "
                "WHERE role = 'distributed' AND table_name <> 'tenants'"
            ).fetchall()
        }
        assert conn.execute("SELECT id FROM ember.tenants").fetchall() == [("acme",)]
    _assert_kept(before, after)
    for table, old in before.items():
        if table in tenant_tables:
            new = after[table]
            assert len(new) == len(old), f"ember.{table}: {len(old)} rows before, {len(new)} after"
            assert {r["tenant_id"] for r in new} <= {"acme"}, f"ember.{table}: a row of no tenant"
    assert tenant_tables <= set(after), "a table of the plan is missing"

    # The upgraded database works as before: one more message lands in the named tenant.
    with psycopg.connect(empty_db, autocommit=True) as conn:
        row = conn.execute(
            "SELECT ember.append_message('acme', 'main', 'user', 'after the upgrade')"
        ).fetchone()
        assert row is not None
        assert conn.execute(
            "SELECT tenant_id FROM ember.messages WHERE id = %s", (row[0],)
        ).fetchone() == ("acme",)
    assert migrate(empty_db, ROOT).applied == []


def test_an_interrupted_upgrade_leaves_the_old_schema_and_runs_again(
    empty_db: str, old_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrate(empty_db, old_root)
    with psycopg.connect(empty_db, autocommit=True) as conn:
        _fill(conn, old_root)
        before = _rows(conn)

    # Another session holds a table the migration alters late, so the migration fails midway,
    # after it has altered the tables before that one.
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with psycopg.connect(empty_db) as other:
            other.execute("LOCK TABLE ember.eval_promotions IN ACCESS SHARE MODE")
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=1500")
        with pytest.raises(MigrationError, match=r"0051_tenants\.sql: .*lock timeout"):
            migrate(empty_db, ROOT)
    finally:
        release.set()
        holder.join()
    monkeypatch.delenv("PGOPTIONS")

    with psycopg.connect(empty_db, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('ember.tenants')").fetchone() == (None,)
        assert conn.execute(
            "SELECT count(*) FROM pg_attribute WHERE attname = 'tenant_id' AND attrelid IN "
            "(SELECT oid FROM pg_class WHERE relnamespace = 'ember'::regnamespace)"
        ).fetchone() == (0,)
        _assert_kept(before, _rows(conn))
        applied = {name for (name,) in conn.execute("SELECT name FROM ember.schema_migrations")}
        assert "0051_tenants.sql" not in applied

    assert "0051_tenants.sql" in migrate(empty_db, ROOT).applied
    with psycopg.connect(empty_db, autocommit=True) as conn:
        assert conn.execute("SELECT id FROM ember.tenants").fetchall() == [("default",)]


def test_a_tenant_name_is_checked_and_must_match_on_a_migrated_database(
    empty_db: str, old_root: Path
) -> None:
    migrate(empty_db, old_root)
    with pytest.raises(
        MigrationError, match=r"0051_tenants\.sql: tenant name 'no spaces' is not a tenant id"
    ):
        migrate(empty_db, ROOT, tenant="no spaces")
    migrate(empty_db, ROOT, tenant="acme")
    assert migrate(empty_db, ROOT, tenant="acme").applied == []
    with pytest.raises(MigrationError, match="--tenant other: this database's rows already belong"):
        migrate(empty_db, ROOT, tenant="other")
