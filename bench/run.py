"""`make bench`: run every bench/b*.py, then assemble docs/benchmarks.md.

Each script is run on its own (a failing one is reported and the others still run); its
printed figures pass through, and its Markdown section (bench/out/bN.md) is placed in
docs/benchmarks.md under a description of the machine and the date. Scripts added later are
picked up by name: nothing here lists them. `python bench/run.py --assemble` only rebuilds
docs/benchmarks.md from the sections already in bench/out/. bench/notes.md, when present, is
appended: what the figures mean and why a target is missed, written by hand.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
from pathlib import Path

import psycopg

from ember.config import database_url

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
OUT = BENCH / "out"
DOC = ROOT / "docs" / "benchmarks.md"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# The vector extensions a build may or may not use: which of them this CPU has.
VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl")


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                have = set(line.split(":", 1)[1].split())
                return ", ".join(f if f in have else f"no {f}" for f in VECTOR_FLAGS)
    except OSError:
        pass
    return "unknown"


def _load() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "unknown"
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
    except OSError:
        return "unknown"
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no", "--", "worker", "functions", "db"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return (out.stdout.strip() or "unknown") + (" with uncommitted changes" if dirty else "")


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                kib = int(line.split()[1])
                return f"{kib / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def _server() -> list[str]:
    with psycopg.connect(database_url(), autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        settings = conn.execute(
            "SELECT name, current_setting(name) FROM pg_settings WHERE name IN "
            "('fsync', 'synchronous_commit', 'full_page_writes', 'shared_buffers', 'wal_level') "
            "ORDER BY name"
        ).fetchall()
    lines = [f"- PostgreSQL {version[0] if version else '?'}"]
    lines.append(
        "- durability and memory settings used: "
        + ", ".join(f"`{name}={value}`" for name, value in settings)
    )
    return lines


def main() -> int:
    scripts = [] if "--assemble" in sys.argv[1:] else sorted(BENCH.glob("b*.py"))
    OUT.mkdir(exist_ok=True)
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load_before = _load()
    failed: list[str] = []
    for script in scripts:
        print(f"== {script.name}", flush=True)
        stale = OUT / f"{script.name.split('_', 1)[0]}.md"
        stale.unlink(missing_ok=True)
        code = subprocess.call([sys.executable, str(script)], cwd=ROOT, env=os.environ.copy())
        if code != 0:
            failed.append(script.name)
            print(f"== {script.name} failed with exit code {code}", flush=True)

    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "# Benchmarks",
        "",
        "Written by `make bench` (bench/run.py), which runs every `bench/b*.py`. Each benchmark",
        "creates its own scratch database on the server below. Figures are ratios taken in one",
        "run, side by side: the machine is shared and noisy, so absolute times are indicative only.",
        "",
        f"Run on {now}"
        + ("" if not scripts else f", started {started}")
        + f", commit {_commit()}:",
        "",
        f"- {os.cpu_count()} CPUs ({_cpu_model()}), {_memory()} memory, "
        f"{platform.system()} {platform.release()}",
        f"- CPU vector extensions: {_cpu_flags()}",
        (
            f"- load average (1 / 5 / 15 min) at the start: {load_before}; at the end: {_load()}"
            if scripts
            else f"- load average (1 / 5 / 15 min) when assembled: {_load()}"
        ),
        *_server(),
        "",
    ]
    for section in sorted(OUT.glob("b*.md"), key=lambda p: (len(p.stem), p.stem)):
        parts.append(section.read_text().rstrip())
        parts.append("")
    notes = BENCH / "notes.md"
    if notes.exists():
        parts.append(notes.read_text().rstrip())
        parts.append("")
    if failed:
        parts.append("## Benchmarks that failed in this run")
        parts.append("")
        parts.extend(f"- `{name}`" for name in failed)
        parts.append("")
    DOC.write_text("\n".join(parts))
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
