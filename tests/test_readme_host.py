"""The host in the README, copied from it and run as written against `ember sim --responder host`:
the one-time set-up, cheap hot runs (at least 95% of the old prefix read from the cache) and
facts, with nothing but the README's own commands."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, LiteralString

import psycopg
import pytest

from workerkit import EMBER, WorkerProcess

ROOT = Path(__file__).resolve().parents[1]


def wait_until(conn: psycopg.Connection[Any], query: LiteralString, timeout: float) -> None:
    """Until the query answers true; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (row := conn.execute(query).fetchone()) or not row[0]:
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {query}")
        time.sleep(0.1)


def readme_host() -> str:
    """The Python block of README's "A host and its sidecar" section, as written."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## A host and its sidecar", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None, "the README's host section holds a Python block"
    return block.group(1)


@pytest.fixture
def sim_process() -> Iterator[str]:
    """`ember sim --responder host` as its own process; its base URL (as it prints it)."""
    proc = subprocess.Popen(
        [EMBER, "sim", "--responder", "host", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    found = re.search(r"listening on (http://\S+)", first)
    assert found, first
    try:
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_readme_host_gets_cheap_hot_runs_and_facts(
    db: str, sim_process: str, tmp_path: Path
) -> None:
    (tmp_path / "host.py").write_text(readme_host(), encoding="utf-8")
    # A system prompt of realistic length, past Sonnet 4.6's observed 2,048-token minimum: the
    # demo host's own, with Ember's base identity and main's role.
    prompts = [
        (ROOT / "examples" / "corpus" / "host-system.md").read_text(),
        *((ROOT / "prompts" / name).read_text() for name in ("system.md", "main.md")),
    ]
    (tmp_path / "system-prompt.md").write_text("\n".join(prompts))
    env = {
        **os.environ,
        "DATABASE_URL": db,
        "ANTHROPIC_BASE_URL": sim_process,
        "ANTHROPIC_API_KEY": "offline",
    }
    host = subprocess.run(
        [sys.executable, "host.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert host.returncode == 0, host.stdout + host.stderr
    assert 'the steward\'s thread "memory-steward" created' in host.stdout
    assert "shadow memory activated" in host.stdout
    assert "trip: Noted: Thanks!" in host.stdout

    settings = subprocess.run(
        [EMBER, "settings", "idle_before_digest", "0 seconds"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert settings.returncode == 0, settings.stderr

    flags = ["--pipelines", "shadow,steward", "--poll-interval", "1", "--tick-interval", "1"]
    worker = WorkerProcess(db, sim_process, *flags)
    try:
        worker.ready()
        with psycopg.connect(db, autocommit=True) as conn:
            wait_until(
                conn,
                "SELECT count(*) = 2 FROM ember.shadow_runs"
                " WHERE path = 'hot' AND status = 'completed'",
                timeout=60,
            )
            wait_until(
                conn, "SELECT count(*) > 0 FROM ember.facts WHERE status = 'active'", timeout=90
            )
            hot = conn.execute(
                "SELECT thread_id, cache_read_tokens, prefix_input_tokens FROM ember.shadow_runs"
                " WHERE path = 'hot' ORDER BY thread_id"
            ).fetchall()
            proposals = conn.execute(
                "SELECT count(*) FROM ember.shadow_proposals WHERE validation_error IS NULL"
            ).fetchone()
    finally:
        worker.stop()
    assert [t for t, _, _ in hot] == ["ops", "trip"]
    for thread, read, prefix in hot:
        assert prefix and read / prefix >= 0.95, (thread, read, prefix)
    assert proposals and proposals[0] > 0

    status = subprocess.run([EMBER, "status"], env=env, capture_output=True, text=True)
    assert status.returncode == 0, status.stderr
    assert "hot-cache-shortfall" not in status.stdout
    found = subprocess.run(
        [EMBER, "search", "window seats", "--viewer", "trip"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert found.returncode == 0, found.stderr
    assert "window seats" in found.stdout
