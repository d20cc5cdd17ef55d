"""Shared fixtures: a migrated template database, and a fresh copy of it per test.

Copies are made with CREATE DATABASE ... TEMPLATE, which is far cheaper than migrating each
time; names carry the pid so two test runs on one server never collide.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from ember.config import database_url, with_database
from ember.devsetup import drop_database, fresh_database

# The simulator's fixtures (sim, sim_client, sim_clock, ...) live beside their helpers.
pytest_plugins = ("simfixtures",)

ROOT = Path(__file__).resolve().parents[1]
_counter = itertools.count()


@pytest.fixture(scope="session")
def server_url() -> str:
    """Any database on the server under test: `DATABASE_URL`, else the embedded one."""
    return database_url()


@pytest.fixture(scope="session")
def template_db(server_url: str) -> Iterator[str]:
    name = f"ember_tpl_{os.getpid()}"
    fresh_database(server_url, name, root=ROOT, pgtap=False)
    yield name
    drop_database(server_url, name)


@pytest.fixture
def db(server_url: str, template_db: str) -> Iterator[str]:
    """A freshly migrated database for one test; its URL."""
    name = f"ember_t_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(with_database(server_url, "postgres"), autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_db)
            )
        )
    yield with_database(server_url, name)
    drop_database(server_url, name)


@pytest.fixture
def empty_db(server_url: str) -> Iterator[str]:
    """An empty database (nothing migrated); its URL."""
    name = f"ember_e_{os.getpid()}_{next(_counter)}"
    drop_database(server_url, name)
    with psycopg.connect(with_database(server_url, "postgres"), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield with_database(server_url, name)
    drop_database(server_url, name)


def _server_users() -> set[str]:
    import pwd

    from ember.embedded import SERVER_USER_PREFIX

    return {p.pw_name for p in pwd.getpwall() if p.pw_name.startswith(SERVER_USER_PREFIX)}


def _checkout_gone(user: str) -> bool:
    """A server user's comment is its checkout's root: only a user whose checkout no longer
    exists is removed, never one a test run in another checkout has just created."""
    import pwd

    try:
        root = pwd.getpwnam(user).pw_gecos
    except KeyError:
        return False
    return bool(root) and not os.path.exists(root)


_USERS_BEFORE: set[str] = set()


def pytest_sessionstart(session: pytest.Session) -> None:
    _USERS_BEFORE.update(_server_users())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run that passed every reliability scenario writes docs/reliability.md from its figures.

    As root, each temporary checkout's server ran as a system user of its own: those the run
    created and whose checkouts are gone are removed, so test runs do not pile up users. A user
    that still owns a process, or whose checkout still exists, is left."""
    import subprocess

    import reliability

    reliability.write_if_complete(session.testsfailed)
    if os.geteuid() == 0:
        for user in sorted(u for u in _server_users() - _USERS_BEFORE if _checkout_gone(u)):
            subprocess.run(["userdel", user], capture_output=True, check=False)
