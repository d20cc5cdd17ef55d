"""`ember demo` when things go wrong: a slice it cannot play, a database server that dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from ember.config import with_database
from ember.embedded import EmbeddedServer
from test_cli import ROOT, ember


def test_a_slice_without_the_interrupted_thread_is_refused_before_the_database(
    server_url: str, tmp_path: Path
) -> None:
    name = f"ember_demo_t_{os.getpid()}_slice"
    out = ember(
        "demo", "--threads", "deploy-workspace,trip-lisbon", "--database", name,
        "--out", str(tmp_path), url=server_url,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert "needs dinner-plans" in out.stderr and "Traceback" not in out.stderr
    unknown = ember("demo", "--threads", "dinner-plans,no-such", "--database", name, url=server_url)
    assert unknown.returncode == 2 and "no thread no-such" in unknown.stderr
    assert "deploy-workspace" in unknown.stderr, "the message lists the corpus's threads"
    with psycopg.connect(with_database(server_url, "postgres")) as conn:
        row = conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (name,))
        assert row.fetchone() == (0,), "nothing was created"
    assert list(tmp_path.iterdir()) == [], "no report was moved or written"


def _worker_backend(url: str, proc: subprocess.Popen[str], timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline and proc.poll() is None:
            row = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = 'ember_demo'"
                " AND application_name LIKE 'ember-worker%' LIMIT 1"
            ).fetchone()
            if row:
                return int(row[0])
            time.sleep(0.05)
    return None


def test_a_server_crash_stops_the_demo_with_one_line(tmp_path: Path) -> None:
    server = EmbeddedServer(tmp_path / "home")
    (tmp_path / "home").mkdir()
    url = server.start()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "ANTHROPIC_API_KEY")}
    env["EMBER_HOME"] = str(tmp_path / "home")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ember.cli", "demo", "--plain", "--port", "0",
         "--out", str(tmp_path / "out"), "--corpus", str(ROOT / "examples" / "corpus")],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        backend = _worker_backend(url, proc, 120)
        assert backend is not None, f"the demo's worker never connected: {proc.stderr}"
        # One backend killed: PostgreSQL ends every session and restarts.
        os.kill(backend, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        server.stop()
    assert proc.returncode == 12, stderr
    assert "Traceback" not in stderr and "Traceback" not in stdout
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "terminated" in lines[0] and str(server.layout.log) in lines[0]
    assert "DATABASE_URL" not in lines[0]
    assert "ember worker stopped" in stdout, "the sidecar was stopped on the way out"
