"""The embedded server: start, restart, URL, stale pid and a taken port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from ember.embedded import EmbeddedError, EmbeddedServer, Layout

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def server() -> Iterator[EmbeddedServer]:
    # A long directory name: the socket path must stay short whatever the checkout's path.
    # Not under pytest's basetemp: as root the server runs as another user, and every pytest
    # session on the machine resets /tmp/pytest-of-root to 0700, which would close the way
    # while initdb or pg_ctl runs. A checkout-like 0711 directory of its own has no such race.
    root = Path(tempfile.mkdtemp(prefix="a-checkout-with-a-rather-long-name-" + "x" * 60))
    root.chmod(0o711)
    srv = EmbeddedServer(root)
    yield srv
    srv.stop()
    shutil.rmtree(root, ignore_errors=True)


def _select_one(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT 1").fetchone()
    assert row is not None
    return int(row[0])


def test_start_restart_and_url(server: EmbeddedServer) -> None:
    url = server.start()
    assert url.startswith("postgresql://postgres@127.0.0.1:")
    assert url.endswith(f"/ember?passfile={server.layout.passfile}")
    assert _select_one(url) == 1
    assert server.start() == url, "starting twice is harmless"
    assert server.status()["running"] is True
    assert server.stop() is True
    assert server.status()["running"] is False
    assert server.start() == url, "a restart keeps the remembered port"
    assert _select_one(url) == 1
    socket_file = server.layout.socket_dir / f".s.PGSQL.{server.port}"
    assert len(str(socket_file).encode()) < 107


def test_cli_url_prints_the_url_alone(server: EmbeddedServer) -> None:
    url = server.start()
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["EMBER_HOME"] = str(server.layout.root)
    out = subprocess.run(
        [sys.executable, "-m", "ember.cli", "db", "url"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == url + "\n"
    env["DATABASE_URL"] = "postgresql://elsewhere/db"
    out = subprocess.run(
        [sys.executable, "-m", "ember.cli", "db", "url"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == "postgresql://elsewhere/db\n", "DATABASE_URL overrides the default"


def test_a_stale_pid_file_is_cleared(server: EmbeddedServer) -> None:
    url = server.start()
    server.stop()
    pidfile = server.layout.pgdata / "postmaster.pid"
    pidfile.write_text("999999\n")  # no such process
    assert server.status()["running"] is False
    assert server.start() == url
    assert _select_one(url) == 1


def test_a_port_in_use_is_a_clear_error(server: EmbeddedServer) -> None:
    server.start()
    port = server.port
    server.stop()
    with socket.socket() as blocker:
        # The stopped server's closed connections may leave the port in TIME_WAIT.
        blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        blocker.bind(("127.0.0.1", port))
        blocker.listen()
        with pytest.raises(EmbeddedError, match=rf"port {port} .* is in use"):
            server.start()


def test_socket_dir_is_short_for_any_root() -> None:
    lay = Layout(Path("/" + "deep/" * 40))
    assert len(str(lay.socket_dir / ".s.PGSQL.65535").encode()) < 107


def test_cli_url_from_anywhere_inside_the_checkout(server: EmbeddedServer) -> None:
    """`ember db url` in a subdirectory finds the checkout's server; outside any checkout it
    names the directory it looked in."""
    url = server.start()
    root = server.layout.root
    (root / "pyproject.toml").write_text("[project]\nname = 'a-checkout'\n")
    (root / "db").mkdir(exist_ok=True)
    inside = root / "docs" / "deeper"
    inside.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "EMBER_HOME")}
    out = subprocess.run(
        [sys.executable, "-m", "ember.cli", "db", "url"],
        env=env,
        cwd=inside,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == url + "\n"
    outside = Path(tempfile.mkdtemp(prefix="not-a-checkout-"))
    try:
        out = subprocess.run(
            [sys.executable, "-m", "ember.cli", "db", "url"],
            env=env,
            cwd=outside,
            capture_output=True,
            text=True,
        )
    finally:
        shutil.rmtree(outside, ignore_errors=True)
    assert out.returncode != 0 and out.stdout == ""
    assert str(outside.resolve()) in out.stderr and "EMBER_HOME" in out.stderr
