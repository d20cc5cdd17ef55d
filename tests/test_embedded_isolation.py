"""Root's `ember db` reads nothing the server's user could point elsewhere, and each checkout's
server runs as a user of its own, so one clone's database superuser cannot read another's data."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import psycopg
import pytest

from ember.embedded import EmbeddedServer, read_owned, server_user
from reliability import record

as_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="the server runs as another user only as root"
)


def test_the_log_is_read_without_following_a_link(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("root's only\n")
    log = tmp_path / "postgres.log"
    log.symlink_to(secret)
    with pytest.raises(OSError):
        read_owned(log, os.geteuid())
    log.unlink()
    os.link(secret, log)  # a second name for the same file: refused too
    with pytest.raises(OSError, match="regular file"):
        read_owned(log, os.geteuid())
    log.unlink()
    log.write_text("".join(f"line {i}\n" for i in range(20000)))
    tail = read_owned(log, os.geteuid(), limit=100)
    assert tail.endswith("line 19999\n") and len(tail) == 100
    record(
        "log-links",
        "a symbolic and a hard link planted at the server log are refused; the tail is bounded",
        2,
        "0 bytes read through a link",
        "tests/test_embedded_isolation.py",
    )


def test_each_checkout_has_its_own_server_user() -> None:
    a, b = Path("/work/a/ember"), Path("/work/b/ember")
    assert server_user(a) != server_user(b)
    assert server_user(a) == server_user(a) and len(server_user(a)) <= 32


@as_root
def test_a_server_runs_as_its_checkout_user_and_cannot_read_another_checkout() -> None:
    roots = [Path(tempfile.mkdtemp(prefix="ember-iso-")) for _ in range(2)]
    servers = []
    try:
        for root in roots:
            root.chmod(0o711)
            srv = EmbeddedServer(root)
            srv.start()
            servers.append(srv)
        users = [server_user(r) for r in roots]
        uids = [pwd.getpwnam(u).pw_uid for u in users]
        assert uids[0] != uids[1]
        for srv, uid in zip(servers, uids, strict=True):
            assert os.lstat(srv.layout.pgdata).st_uid == uid
            pid = srv.running_pid()
            assert pid is not None
            status = Path(f"/proc/{pid}/status").read_text()
            assert f"Uid:\t{uid}\t" in status
        # The first clone's superuser reads a file of the second clone's data directory.
        other = servers[1].layout.pgdata / "PG_VERSION"
        with (
            psycopg.connect(servers[0].url(), autocommit=True) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            conn.execute("SELECT pg_read_file(%s)", (str(other),))
        record(
            "log-links",
            "a symbolic and a hard link planted at the server log are refused; two checkouts'"
            " servers run as two users, and one's superuser cannot read the other's data files",
            3,
            "0 bytes read through a link or across checkouts",
            "tests/test_embedded_isolation.py",
        )
    finally:
        for srv in servers:
            srv.stop()
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)
            subprocess.run(["userdel", server_user(root)], capture_output=True, check=False)
