"""Development and test set-up: pgTAP from Debian, and fresh test databases."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from ember import queries
from ember.config import uses_embedded, with_database
from ember.debian import CHROMIUM_PACKAGES, OBJDUMP_PACKAGES, PGTAP_PACKAGES
from ember.embedded import EmbeddedServer
from ember.migrate import MigrateResult, migrate

PGTAP_SOURCE = Path("/usr/share/postgresql/15/extension")


class SetupError(RuntimeError):
    pass


class RefusedError(RuntimeError):
    """A request Ember will not carry out, e.g. wiping a database that is not a test database."""


# A test database says so in its name: `test` as a whole word between underscores
# (ember_test, test_ember, ember_test_2) or the pytest fixtures' ember_t_/ember_tpl_/ember_e_.
TEST_DATABASE_NAME = re.compile(
    r"^(?:[a-z0-9_]*_)?test(?:_[a-z0-9_]*)?$|^ember_(?:t|tpl|e)_[0-9_]+$"
)
NEVER_TEST_DATABASES = frozenset({"postgres", "template0", "template1", "ember"})


def check_test_database(base_url: str, name: str) -> None:
    """Refuse to drop and recreate `name` unless it is clearly a test database, and never the
    database `base_url` (what `ember db url` prints) points at: `ember testdb` wipes it."""
    configured = conninfo_to_dict(base_url).get("dbname")
    if name == configured or name in NEVER_TEST_DATABASES:
        raise RefusedError(
            f"refusing to wipe database {name!r}: it is the development database "
            "(the one `ember db url` names); pick a test database such as ember_test"
        )
    if not TEST_DATABASE_NAME.match(name):
        raise RefusedError(
            f"refusing to wipe database {name!r}: a test database's name contains the word "
            "test between underscores (ember_test, ember_test_2, test_ember)"
        )


def _apt_install(packages: tuple[str, ...], why: str) -> None:
    """Install Debian packages with apt-get as root (updating the index once if the first try
    fails), or say the command to run."""
    command = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    if os.geteuid() != 0:
        raise SetupError(
            f"{why} is missing. Install it with:\n  sudo apt-get update && sudo {' '.join(command)}"
        )
    print(f"installing {' '.join(packages)} from Debian ({why})", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    first = subprocess.run(command, env=env, capture_output=True, text=True)
    if first.returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, check=True, capture_output=True)
        subprocess.run(command, env=env, check=True, capture_output=True)


def _pgtap_present() -> bool:
    return (PGTAP_SOURCE / "pgtap.control").exists() and shutil.which("pg_prove") is not None


def ensure_pgtap() -> None:
    """Make sure Debian's pgTAP and pg_prove exist; copy the extension into the embedded server.

    pgTAP is plain SQL and PL/pgSQL, so the files Debian builds for PostgreSQL 15 load into the
    embedded PostgreSQL 18 unchanged.
    """
    if not _pgtap_present():
        _apt_install(PGTAP_PACKAGES, "pgTAP (the SQL tests)")
        if not _pgtap_present():
            raise SetupError(f"apt-get installed {PGTAP_PACKAGES} but pgtap.control is missing")
    if uses_embedded():
        EmbeddedServer().install_extension_files(PGTAP_SOURCE, "pgtap*")


def chromium_path() -> str | None:
    """Debian's headless-capable browser, for the report's browser test."""
    return shutil.which("chromium")


def ensure_chromium() -> str:
    """Make sure Debian's `chromium` is installed (as root with apt-get, else say how); its path.

    The HTML report is checked in a real browser (no console error, no network request, charts
    drawn), so a fresh machine needs one just as it needs pgTAP.
    """
    path = chromium_path()
    if path:
        return path
    _apt_install(CHROMIUM_PACKAGES, "Chromium (the HTML report's browser test)")
    path = chromium_path()
    if not path:
        raise SetupError(f"apt-get installed {CHROMIUM_PACKAGES} but no chromium is on PATH")
    return path


def ensure_objdump() -> str:
    """Debian's binutils: the portability test disassembles the embedded pgvector with objdump
    (tests/test_portable_build.py); its path."""
    path = shutil.which("objdump")
    if path:
        return path
    _apt_install(OBJDUMP_PACKAGES, "objdump (the portable-build test)")
    path = shutil.which("objdump")
    if not path:
        raise SetupError("apt-get installed binutils but no objdump is on PATH")
    return path


def fresh_database(
    base_url: str, name: str, *, root: Path, pgtap: bool
) -> tuple[str, MigrateResult]:
    """Drop and recreate database `name` on the server of `base_url`, migrate it, add pgTAP."""
    admin = with_database(base_url, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        ident = sql.Identifier(name)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(ident))
    url = with_database(base_url, name)
    result = migrate(url, root)
    if pgtap:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pgtap")
    return url, result


def drop_database(base_url: str, name: str) -> None:
    with psycopg.connect(with_database(base_url, "postgres"), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def database_exists(base_url: str, name: str) -> bool:
    with psycopg.connect(with_database(base_url, "postgres"), autocommit=True) as conn:
        return conn.execute(queries.DATABASE_EXISTS, {"name": name}).fetchone() is not None
