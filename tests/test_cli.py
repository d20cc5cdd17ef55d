"""The CLI's expected failures: one line on stderr, a documented exit code, no traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from ember.cli import (
    EXIT_AUTH,
    EXIT_BAD_URL,
    EXIT_MIGRATIONS,
    EXIT_NOT_RUNNING,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
)
from ember.config import with_database
from ember.migrate import check_schema_current, migrate, sql_root, status

ROOT = Path(__file__).resolve().parents[1]


def ember(
    *args: str, url: str | None = None, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "EMBER_HOME")}
    if url is not None:
        env["DATABASE_URL"] = url
    if home is not None:
        env["EMBER_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "ember.cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def one_line_failure(out: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert out.returncode == code, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    for word in words:
        assert word in lines[0]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_database_is_exit_4() -> None:
    out = ember("migrate", url=f"postgresql://postgres@127.0.0.1:{_closed_port()}/x")
    one_line_failure(out, EXIT_UNREACHABLE, "cannot reach 127.0.0.1:", "Connection refused")


def test_unknown_host_is_exit_4() -> None:
    out = ember("migrate", "--status", url="postgresql://postgres@no-such-host.invalid/x")
    one_line_failure(out, EXIT_UNREACHABLE, "no-such-host.invalid")


def test_malformed_url_is_exit_6() -> None:
    one_line_failure(ember("migrate", url="not a url"), EXIT_BAD_URL, "DATABASE_URL is malformed")
    one_line_failure(ember("db", "url", url="postgresql://[oops"), EXIT_BAD_URL, "malformed")


def test_authentication_failure_is_exit_5(server_url: str) -> None:
    params = psycopg.conninfo.conninfo_to_dict(server_url)
    bad = psycopg.conninfo.make_conninfo(
        "",
        host=str(params["host"]),
        port=str(params["port"]),
        dbname="postgres",
        user="no_such_user",
        password="wrong",
    )
    out = ember("migrate", url=bad)
    one_line_failure(out, EXIT_AUTH, "authentication to", "no_such_user")
    assert "wrong" not in out.stderr, "the password never appears in the message"


def test_db_url_of_a_stopped_server_is_exit_3(tmp_path: Path) -> None:
    out = ember("db", "url", home=tmp_path)
    one_line_failure(out, EXIT_NOT_RUNNING, "not running", "ember db start")
    assert out.stdout == ""


def test_debug_shows_the_traceback() -> None:
    out = ember("--debug", "migrate", url=f"postgresql://postgres@127.0.0.1:{_closed_port()}/x")
    assert out.returncode == EXIT_UNREACHABLE
    assert "Traceback" in out.stderr


def test_help_documents_the_exit_codes() -> None:
    out = ember("--help")
    assert out.returncode == 0
    for line in (
        "3  the embedded server is not running",
        "4  the database cannot be reached",
        "5  authentication",
        "6  malformed DATABASE_URL",
        "7  the database's migrations",
    ):
        assert line in out.stdout


def test_status_and_dry_run_change_nothing(empty_db: str) -> None:
    dry = ember("migrate", "--dry-run", url=empty_db)
    assert dry.returncode == 0, dry.stderr
    assert "would apply 0001_core.sql" in dry.stdout
    st = ember("migrate", "--status", url=empty_db)
    assert st.returncode == EXIT_MIGRATIONS
    assert "pending  0001_core.sql" in st.stdout and "functions stale" in st.stdout
    with psycopg.connect(empty_db) as conn:
        row = conn.execute(
            "SELECT to_regnamespace('ember'), to_regclass('ember.schema_migrations')"
        )
        assert row.fetchone() == (None, None), "neither created the schema nor the ledger"
    assert ember("migrate", url=empty_db).returncode == 0
    st = ember("migrate", "--status", url=empty_db)
    assert st.returncode == 0, st.stderr
    assert "applied  0001_core.sql" in st.stdout and "functions current" in st.stdout
    dry = ember("migrate", "--dry-run", url=empty_db)
    assert "would apply" not in dry.stdout


def test_status_names_an_edited_migration(empty_db: str, tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "db").symlink_to(ROOT / "db")
    (root / "functions").symlink_to(ROOT / "functions")
    migrate(empty_db, ROOT)
    copy = tmp_path / "copy"
    (copy / "db" / "migrations").mkdir(parents=True)
    for path in (ROOT / "db" / "migrations").glob("*.sql"):
        (copy / "db" / "migrations" / path.name).write_bytes(path.read_bytes())
    (copy / "functions").symlink_to(ROOT / "functions")
    edited = copy / "db" / "migrations" / "0002_labels.sql"
    edited.write_text(edited.read_text() + "\n-- edited\n")
    st = status(empty_db, copy)
    assert st.edited == ["0002_labels.sql"] and not st.pending
    assert "0002_labels.sql" in (check_schema_current(empty_db, copy) or "")


def test_check_schema_current_names_the_difference(db: str) -> None:
    assert check_schema_current(db) is None
    assert sql_root() == ROOT, "an editable install reads the checkout"
    with psycopg.connect(db, autocommit=True) as conn:
        row = conn.execute(
            "DELETE FROM ember.schema_migrations WHERE name = '0005_copy_lineage.sql' "
            "RETURNING name, sha256"
        ).fetchone()
        assert check_schema_current(db) == (
            "the database lacks migrations 0005_copy_lineage.sql: run `ember migrate`"
        )
        conn.execute(
            "INSERT INTO ember.schema_migrations (name, sha256) VALUES ('9999_future.sql', 'x')"
        )
        message = check_schema_current(db)
        assert message is not None and "does not know (9999_future.sql)" in message
        conn.execute("DELETE FROM ember.schema_migrations WHERE name = '9999_future.sql'")
        conn.execute("INSERT INTO ember.schema_migrations (name, sha256) VALUES (%s, %s)", row)
        assert check_schema_current(db) is None
        conn.execute("UPDATE ember.schema_functions SET sha256 = 'old'")
        assert check_schema_current(db) == (
            "the database's functions are not this ember's: run `ember migrate`"
        )


@pytest.mark.parametrize("name", ["ember", "postgres", "mydata", "contest", "latest_rows"])
def test_testdb_refuses_names_that_are_not_test_databases(server_url: str, name: str) -> None:
    out = ember("testdb", "--name", name, url=with_database(server_url, "ember"))
    one_line_failure(out, EXIT_REFUSED, "refusing to wipe", repr(name))


def test_testdb_refuses_the_configured_database(server_url: str, empty_db: str) -> None:
    # Even a test-looking name is refused when it is the database DATABASE_URL names.
    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE keep_me (id int)")
    name = psycopg.conninfo.conninfo_to_dict(empty_db)["dbname"]
    out = ember("testdb", "--name", str(name), url=empty_db)
    one_line_failure(out, EXIT_REFUSED, "development database")
    with psycopg.connect(empty_db) as conn:
        assert conn.execute("SELECT to_regclass('keep_me')").fetchone() == ("keep_me",)
