"""Two-tier migrations against a real server: idempotence, checksums, concurrency."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest

from ember.migrate import MigrationError, migrate

ROOT = Path(__file__).resolve().parents[1]

FINGERPRINT = """
SELECT md5(string_agg(item, E'\\n' ORDER BY item)) FROM (
    SELECT 'fn ' || p.oid::regprocedure::text || ' ' || md5(pg_get_functiondef(p.oid))
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = 'ember' AND p.prokind IN ('f', 'p')
    UNION ALL
    SELECT 'rel ' || c.relname || ' ' || c.relkind::text || ' ' || c.oid::text
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'ember'
    UNION ALL
    SELECT 'mig ' || name || ' ' || sha256 || ' ' || applied_at FROM ember.schema_migrations
    UNION ALL
    SELECT 'model ' || m::text FROM ember.models m
    UNION ALL
    SELECT 'setting ' || s::text FROM ember.settings s
) AS items(item)
"""


def fingerprint(url: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute(FINGERPRINT).fetchone()
        assert row is not None
        return str(row[0])


def test_migrate_twice_is_a_no_op(empty_db: str) -> None:
    first = migrate(empty_db, ROOT)
    assert "0001_core.sql" in first.applied
    before = fingerprint(empty_db)
    second = migrate(empty_db, ROOT)
    assert second.applied == []
    assert fingerprint(empty_db) == before


def test_cli_migrate_second_run_applies_nothing(empty_db: str) -> None:
    env = {"DATABASE_URL": empty_db, "PATH": "/usr/bin:/bin"}
    cmd = [sys.executable, "-m", "ember.cli", "migrate"]
    first = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    assert "0001_core.sql" in first.stdout
    second = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert "migrations applied: none" in second.stdout


def test_an_edited_applied_migration_is_refused_by_name(empty_db: str, tmp_path: Path) -> None:
    root = tmp_path / "proj"
    shutil.copytree(ROOT / "db", root / "db")
    shutil.copytree(ROOT / "functions", root / "functions")
    migrate(empty_db, root)
    target = root / "db" / "migrations" / "0001_core.sql"
    target.write_text(target.read_text() + "\n-- an innocent-looking edit\n")
    with pytest.raises(MigrationError, match=r"db/migrations/0001_core\.sql was edited"):
        migrate(empty_db, root)


def test_a_failing_migration_is_not_recorded(empty_db: str, tmp_path: Path) -> None:
    root = tmp_path / "proj"
    shutil.copytree(ROOT / "db", root / "db")
    shutil.copytree(ROOT / "functions", root / "functions")
    bad = root / "db" / "migrations" / "9999_broken.sql"
    bad.write_text("CREATE TABLE ember.half_done (id int);\nSELECT no_such_function();\n")
    with pytest.raises(MigrationError, match=r"9999_broken\.sql"):
        migrate(empty_db, root)
    with psycopg.connect(empty_db) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM ember.schema_migrations")]
        half = conn.execute("SELECT to_regclass('ember.half_done')").fetchone()
    assert "9999_broken.sql" not in names
    assert half == (None,), "a failed migration leaves nothing behind"


def test_two_concurrent_migrates_both_succeed_and_apply_once(empty_db: str) -> None:
    results: list[object] = []
    barrier = threading.Barrier(2)

    def run() -> None:
        barrier.wait()
        try:
            results.append(migrate(empty_db, ROOT))
        except Exception as exc:  # recorded and asserted below
            results.append(exc)

    workers = [threading.Thread(target=run) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert all(not isinstance(r, Exception) for r in results), results
    applied = [name for r in results for name in r.applied]  # type: ignore[attr-defined]
    assert applied.count("0001_core.sql") == 1
    with psycopg.connect(empty_db) as conn:
        row = conn.execute(
            "SELECT count(*) FROM ember.schema_migrations WHERE name = '0001_core.sql'"
        ).fetchone()
    assert row == (1,)
