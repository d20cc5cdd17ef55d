"""The embedded server lets no one else in, follows no link when run as root, and survives a
SIGKILL in the middle of a write load without losing an acknowledged commit."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from ember.embedded import EmbeddedError, EmbeddedServer, bin_dir

as_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="the server runs as another user only as root"
)


def _reachable_dir(prefix: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o711)
    return root


@pytest.fixture
def server() -> Iterator[EmbeddedServer]:
    root = _reachable_dir("ember-safety-")
    srv = EmbeddedServer(root)
    yield srv
    srv.stop()
    shutil.rmtree(root, ignore_errors=True)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_connection_without_the_password_is_refused(server: EmbeddedServer) -> None:
    url = server.start()
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("postgres",)
    port = server.port
    for host in ("127.0.0.1", str(server.layout.socket_dir)):
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(
                host=host, port=port, user="postgres", dbname="postgres", passfile="/dev/null"
            ).close()
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(
                host=host,
                port=port,
                user="postgres",
                dbname="postgres",
                password="guess",
                passfile="/dev/null",
            ).close()
    lay = server.layout
    assert _mode(lay.passfile) == 0o600 and os.lstat(lay.passfile).st_uid == os.geteuid()
    assert _mode(lay.socket_dir) == 0o700, "the socket directory is private to the server's owner"
    assert _mode(lay.log_dir) == 0o700 and _mode(lay.log) == 0o600
    password = lay.passfile.read_text().strip().rsplit(":", 1)[1]
    assert password not in url and len(password) >= 32


@as_root
def test_another_user_cannot_reach_the_socket(server: EmbeddedServer) -> None:
    server.start()
    psql = bin_dir() / "psql"
    out = subprocess.run(
        [
            str(psql),
            "-h",
            str(server.layout.socket_dir),
            "-p",
            str(server.port),
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-w",
            "-c",
            "SELECT 1",
        ],
        user="nobody",
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert out.returncode != 0
    assert "Permission denied" in out.stderr or "password" in out.stderr


def test_status_reports_durability(server: EmbeddedServer) -> None:
    assert server.status()["durability"]["source"] == "configured"  # type: ignore[index]
    server.start()
    durability = server.status()["durability"]
    assert durability == {
        "fsync": "on",
        "full_page_writes": "on",
        "synchronous_commit": "on",
        "source": "server",
        "mode": durability["mode"],  # type: ignore[index]
    }
    assert str(durability["mode"]).startswith("crash-safe")  # type: ignore[index]


def test_a_path_a_shell_would_expand_is_refused() -> None:
    parent = _reachable_dir("ember-shell-")
    # initdb and pg_ctl run from "/": that is where the command would leave its mark.
    marker = Path("/ember-shell-test-marker")
    root = parent / f"co$(touch {marker.name})"
    root.mkdir()
    root.chmod(0o711)
    try:
        with pytest.raises(EmbeddedError, match="shell"):
            EmbeddedServer(root).start()
        assert not marker.exists()
        assert not (root / ".ember" / "pgdata").exists()
    finally:
        shutil.rmtree(parent, ignore_errors=True)


@as_root
def test_planted_links_change_no_owner_outside_ember() -> None:
    root = _reachable_dir("ember-links-")
    victims = _reachable_dir("ember-victims-")
    secret = victims / "root-only"
    secret.write_text("root's\n")
    secret.chmod(0o600)
    try:
        home = root / ".ember"
        home.mkdir()
        # Links an earlier, compromised server user could have left: the old log path, and a
        # stray one; the old code chowned the whole tree and touched the log through them.
        (home / "postgres.log").symlink_to(secret)
        (home / "stray").symlink_to(victims)
        srv = EmbeddedServer(root)
        try:
            srv.start()
        finally:
            srv.stop()
        for path in (secret, victims):
            st = os.lstat(path)
            assert (st.st_uid, st.st_gid) == (0, 0), f"{path} changed owner"
        assert secret.read_text() == "root's\n" and _mode(secret) == 0o600
        assert _mode(victims) == 0o711
        assert os.lstat(home / "stray").st_uid == 0, "the link itself was not chowned either"

        # A link where Ember expects its own directory is refused, not followed.
        shutil.rmtree(home / "log")
        (home / "log").symlink_to(victims)
        with pytest.raises(EmbeddedError, match="not a plain directory"):
            EmbeddedServer(root).start()
        assert os.lstat(victims).st_uid == 0 and _mode(victims) == 0o711
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(victims, ignore_errors=True)


@as_root
def test_a_closed_parent_is_opened_only_while_pg_ctl_runs() -> None:
    closed = Path(tempfile.mkdtemp(prefix="ember-closed-"))  # 0700: the server user cannot pass
    srv = EmbeddedServer(closed / "checkout")
    try:
        url = srv.start()  # initdb, start, and the reload that closes the password-less door
        assert _mode(closed) == 0o700, "the parent's mode is back once the server runs"
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert srv.stop() is True
        assert _mode(closed) == 0o700
        with pytest.raises(psycopg.OperationalError, match="password"):
            srv.start()
            psycopg.connect(
                host="127.0.0.1",
                port=srv.port,
                user="postgres",
                dbname="postgres",
                passfile="/dev/null",
            ).close()
    finally:
        srv.stop()
        shutil.rmtree(closed, ignore_errors=True)


def _server_pids(postmaster: int) -> list[int]:
    pids = [postmaster]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == postmaster:
                pids.append(int(entry.name))
    return pids


@pytest.mark.parametrize("synchronous", [True, False], ids=["default", "session-async-commit"])
def test_sigkill_during_a_write_load_loses_no_acknowledged_commit(
    server: EmbeddedServer, synchronous: bool
) -> None:
    url = server.start()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE load (id bigint PRIMARY KEY, body text NOT NULL)")
    acknowledged: list[int] = []
    acked_at: list[float] = []
    enough = threading.Event()
    stopped = threading.Event()

    def writer() -> None:
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                if not synchronous:
                    conn.execute("SET synchronous_commit = off")
                i = 0
                started = time.monotonic()
                while True:
                    i += 1
                    conn.execute("INSERT INTO load VALUES (%s, repeat('x', 2000))", (i,))
                    acknowledged.append(i)
                    acked_at.append(time.monotonic())
                    # Long enough that the documented window is a small part of the load.
                    if i >= 200 and acked_at[-1] - started > 2.0:
                        enough.set()
        except psycopg.Error:
            stopped.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    assert enough.wait(60), "the write load did not get going"
    pid = server.running_pid()
    assert pid is not None
    killed_at = time.monotonic()
    for p in _server_pids(pid):
        os.kill(p, signal.SIGKILL)
    assert stopped.wait(30), "the writer noticed the crash"
    thread.join(10)
    deadline = time.monotonic() + 30
    while server.running_pid() is not None and time.monotonic() < deadline:
        time.sleep(0.05)  # the kernel reaps the killed postmaster

    assert server.start() == url, "the cluster starts again after the crash"
    with psycopg.connect(url) as conn:
        present = {r[0] for r in conn.execute("SELECT id FROM load")}
        by_index = conn.execute(
            "SELECT count(*) FROM load WHERE id = ANY(%s)", (list(present),)
        ).fetchone()
    assert by_index == (len(present),), "heap and primary key agree"
    missing = [i for i in acknowledged if i not in present]
    if synchronous:
        assert missing == [], "every acknowledged commit survived"
    else:
        # A session that opts into synchronous_commit=off may lose only a tail of its last
        # ~0.6 s, never a gap.
        assert missing == acknowledged[len(acknowledged) - len(missing) :]
        lost_window = [t for i, t in zip(acknowledged, acked_at, strict=True) if i in set(missing)]
        assert all(killed_at - t < 1.0 for t in lost_window), "lost only the documented window"
    log = server.layout.log.read_text(errors="replace")
    assert "database system was interrupted" in log or "not properly shut down" in log
