"""Shared by the worker benchmarks (b3, b4): a scratch database, a worker process, /proc figures.

Not a benchmark itself (make bench runs bench/b*.py only).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

from ember.config import database_url
from ember.devsetup import drop_database, fresh_database

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
EMBER = str(Path(sys.executable).parent / "ember")


def scratch_database(name: str) -> str:
    url, _ = fresh_database(database_url(), name, root=ROOT, pgtap=False)
    return url


def drop_scratch(name: str) -> None:
    drop_database(database_url(), name)


def start_worker(url: str, base_url: str, *args: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "bench",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("DATABASE_URL", None)
    proc = subprocess.Popen(
        [EMBER, "worker", "--database-url", url, "--log-format", "json", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # until it is ready; the rest is drained by a thread
        if '"event": "ready"' in line:
            break
    else:
        raise SystemExit(f"the worker exited before it was ready ({proc.wait()})")
    import threading

    threading.Thread(target=lambda: [None for _ in proc.stdout or []], daemon=True).start()
    return proc


def stop_worker(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.wait(60)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def wait_count(url: str, sql: str, want: int, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            row: Any = conn.execute(sql).fetchone()
            if row and row[0] >= want:
                return
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out: {sql} reached {row[0] if row else 0} of {want}")
            time.sleep(0.01)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


def machine() -> str:
    cpus = os.cpu_count()
    model = "unknown cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpus} cores, {model}"


def write_section(name: str, text: str) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.md"
    path.write_text(text)
    return path
