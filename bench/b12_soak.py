"""B12: a bounded soak. Thousands of threads append while two workers run the shadow and
steward pipelines against `ember sim`: no error in either worker's log, no lease that lapsed
(every run ends by its own submit or release), and each worker's memory, sampled every
`--sample-every` seconds, flat once the embedder is loaded and warm.

The embedder (torch and all-MiniLM-L6-v2) loads on a worker's first embedding, a few hundred MB
once; the series marks that moment for each worker (torch mapped into the process, read from
/proc/PID/maps) and steady state is measured from a warm-up after it. The second worker runs
with MALLOC_ARENA_MAX (`--arena-max`, 0 for the default), so the two columns compare glibc's
default arenas with few arenas in one run. `--memtrace N` asks each worker for a memory line
every N seconds (EMBER_MEMTRACE, ember/worker/memtrace.py): `--trim` calls malloc_trim(0)
before each and records what it handed back, `--heap` adds tracemalloc's Python heap (which
slows the workers and doubles their memory: that run's RSS is not the soak's).

    .venv/bin/python bench/b12_soak.py [--threads 2000] [--seconds 600] [--arena-max 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from _worker_common import drop_scratch, machine, scratch_database, write_section

from ember.sim import SimServer

DB = "ember_bench_b11"
EMBER = str(Path(sys.executable).parent / "ember")


class Worker:
    def __init__(self, url: str, base_url: str, name: str, extra_env: dict[str, str]) -> None:
        self.name, self.extra_env = name, extra_env
        env = {
            **os.environ,
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": "bench",
            "PYTHONUNBUFFERED": "1",
            **extra_env,
        }
        env.pop("DATABASE_URL", None)
        self.proc = subprocess.Popen(
            [
                EMBER,
                "worker",
                "--database-url",
                url,
                "--log-format",
                "json",
                "--name",
                name,
                "--concurrency",
                "4",
                "--pipelines",
                "shadow,steward",
                "--tick-interval",
                "5",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.errors: list[str] = []
        self.memtrace: list[tuple[float, dict[str, Any]]] = []
        self.started = time.monotonic()
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self.ready.wait(120):
            raise SystemExit(f"worker {name} did not start")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                entry = json.loads(line)
            except ValueError:
                # Not a log line of the worker's: a library's progress bar on stderr, or a crash.
                if "Traceback" in line or "Error" in line:
                    self.errors.append(line.strip())
                continue
            if entry.get("event") == "ready":
                self.ready.set()
            if entry.get("event") == "memtrace":
                self.memtrace.append((time.monotonic(), entry))
            if entry.get("level") in ("error", "critical") or "Traceback" in line:
                self.errors.append(entry.get("msg", line.strip()))

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def torch_loaded(self) -> bool:
        """The embedder is loaded once torch's library is mapped into the process."""
        try:
            return "libtorch_cpu" in Path(f"/proc/{self.proc.pid}/maps").read_text()
        except OSError:
            return False

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(120)


@dataclass
class Sample:
    at: float  # seconds since the workers were ready
    rss: list[float]  # MB, one per worker
    torch: list[bool]  # the embedder loaded, one per worker
    embedded: int  # active facts with an embedding, in the database


def warm_index(samples: list[Sample], worker: int, warm_up: float) -> int | None:
    """The first sample `warm_up` seconds after the worker had torch mapped and the first fact
    was embedded: torch is mapped early in its import, which goes on for seconds after."""
    loaded = next((s.at for s in samples if s.torch[worker]), None)
    embedded = next((s.at for s in samples if s.embedded), None)
    if loaded is None or embedded is None:
        return None
    start = max(loaded, embedded) + warm_up
    return next((n for n, s in enumerate(samples) if s.at >= start), None)


def slope_mb_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB), in MB per minute."""
    if len(points) < 2:
        return float("nan")
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    return 60 * sxy / sxx if sxx else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--sample-every", type=float, default=10.0)
    ap.add_argument("--warm-up", type=float, default=60.0, help="seconds after the embedder loads")
    ap.add_argument("--arena-max", type=int, default=2, help="MALLOC_ARENA_MAX of the 2nd worker")
    ap.add_argument("--memtrace", type=float, default=0.0, help="worker memory lines, seconds")
    ap.add_argument("--heap", action="store_true", help="tracemalloc's Python heap in them")
    ap.add_argument("--trim", action="store_true", help="malloc_trim(0) before each of them")
    args = ap.parse_args()
    rng = random.Random(10)
    url = scratch_database(DB)
    envs: list[dict[str, str]] = [{}, {}]
    if args.arena_max:
        envs[1]["MALLOC_ARENA_MAX"] = str(args.arena_max)
    for env in envs:
        if args.memtrace:
            env["EMBER_MEMTRACE"] = str(args.memtrace)
            env["EMBER_MEMTRACE_HEAP"] = "1" if args.heap else "0"
            env["EMBER_MEMTRACE_TRIM"] = "1" if args.trim else "0"
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5')"
            )
            conn.execute("SELECT ember.ensure_steward_thread('default')")
            conn.execute("SELECT ember.shadow_activate()")
            conn.execute(
                "UPDATE ember.settings SET value = '\"0 seconds\"' WHERE key = 'idle_before_digest'"
            )
            for i in range(args.threads):
                conn.execute("SELECT ember.create_thread('default', %s, 'side')", (f"s{i}",))
        with SimServer(responder="heuristic") as sim:
            workers = [Worker(url, sim.base_url, f"soak{i}", envs[i]) for i in range(2)]
            samples: list[Sample] = []
            appended = 0
            t0 = time.monotonic()
            next_sample = t0
            with psycopg.connect(url, autocommit=True) as conn:

                def sample() -> None:
                    row = conn.execute(EMBEDDED).fetchone()
                    samples.append(
                        Sample(
                            time.monotonic() - t0,
                            [w.rss_mb() for w in workers],
                            [w.torch_loaded() for w in workers],
                            int(row[0]) if row else 0,
                        )
                    )
                    s = samples[-1]
                    print(
                        f"{s.at:6.0f} s  RSS "
                        + "  ".join(
                            f"{r:6.0f} MB{' (embedder)' if t else ''}"
                            for r, t in zip(s.rss, s.torch, strict=True)
                        )
                        + f"  embedded facts {s.embedded}",
                        flush=True,
                    )

                while time.monotonic() - t0 < args.seconds:
                    if time.monotonic() >= next_sample:
                        sample()
                        next_sample += args.sample_every
                    with conn.transaction():
                        for _ in range(20):
                            t = f"s{rng.randrange(args.threads)}"
                            human = rng.random() < 0.5
                            conn.execute(
                                "SELECT ember.append_message('default', %s, %s, %s, %s)",
                                (
                                    t,
                                    "user" if human else "assistant",
                                    f"I prefer tea number {appended}.",
                                    "human" if human else None,
                                ),
                            )
                            conn.execute("SELECT ember.task_ended('default', %s)", (t,))
                            appended += 1
                    time.sleep(0.05)
                sample()
            codes = [w.stop() for w in workers]
        with psycopg.connect(url, autocommit=True) as conn:
            runs = conn.execute(
                "SELECT status, coalesce(error, ''), count(*) FROM ember.shadow_runs GROUP BY 1, 2"
                " UNION ALL SELECT 'steward ' || status, coalesce(error, ''), count(*)"
                " FROM ember.steward_runs GROUP BY 1, 2 ORDER BY 1, 2"
            ).fetchall()
        lapsed = sum(n for status, error, n in runs if error == "lease expired")
        running = sum(n for status, _, n in runs if status.endswith("running"))
        errors = [e for w in workers for e in w.errors]
        text = report(args, workers, samples, appended, runs, errors, lapsed, running, codes, t0)
        print(text)
        for e in errors[:10]:
            print("error:", e)
        write_section("b12", text)
    finally:
        drop_scratch(DB)


EMBEDDED = "SELECT count(*) FROM ember.facts WHERE status = 'active' AND embedding IS NOT NULL"


def label(worker: Worker) -> str:
    arena = worker.extra_env.get("MALLOC_ARENA_MAX")
    return f"{worker.name} (MALLOC_ARENA_MAX={arena})" if arena else f"{worker.name} (default)"


def report(
    args: argparse.Namespace,
    workers: list[Worker],
    samples: list[Sample],
    appended: int,
    runs: list[Any],
    errors: list[str],
    lapsed: int,
    running: int,
    codes: list[int],
    t0: float,
) -> str:
    lines = [
        "## B12: soak",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {machine()}, load {os.getloadavg()[0]:.2f}.",
        f"{args.threads} threads, {appended} rows appended (half human, each with an offer)"
        f" over {args.seconds:.0f} s while two workers (concurrency 4, shadow and steward)"
        f" ran; RSS sampled every {args.sample_every:.0f} s."
        + (f" The workers' memtrace lines every {args.memtrace:.0f} s" if args.memtrace else "")
        + (", with tracemalloc's Python heap" if args.memtrace and args.heap else "")
        + (
            ", each after malloc_trim(0) (so the series shows RSS trimmed every"
            f" {args.memtrace:.0f} s)"
            if args.memtrace and args.trim
            else ""
        )
        + ("." if args.memtrace else ""),
        "",
        "| figure | value |",
        "|---|---|",
        f"| error lines in the workers' logs | {len(errors)} |",
        f"| runs whose lease lapsed | {lapsed} |",
        f"| runs still running after both workers stopped | {running} |",
        f"| worker exit codes | {', '.join(map(str, codes))} |",
    ]
    steady: list[str] = []
    findings: list[str] = []
    for n, w in enumerate(workers):
        loaded = next((s for s in samples if s.torch[n]), None)
        warm = warm_index(samples, n, args.warm_up)
        if loaded is None:
            lines.append(f"| {label(w)}: embedder loaded | never (no fact embedded) |")
            continue
        first_fact = next((s.at for s in samples if s.embedded), None)
        lines.append(
            f"| {label(w)}: embedder mapped by; first fact embedded by | {loaded.at:.0f} s; "
            + (f"{first_fact:.0f} s |" if first_fact is not None else "never |")
        )
        if warm is None:
            lines.append(f"| {label(w)}: steady state | not reached within the run |")
            continue
        tail = samples[warm:]
        half = tail[len(tail) // 2 :]
        first, last = tail[0].rss[n], tail[-1].rss[n]
        lines.append(
            f"| {label(w)}: RSS from {tail[0].at:.0f} s (warm) to the end | {first:.0f} → "
            f"{last:.0f} MB ({last - first:+.0f}); peak {max(s.rss[n] for s in samples):.0f} |"
        )
        lines.append(
            f"| {label(w)}: RSS slope, whole steady state / its second half | "
            f"{slope_mb_per_min([(s.at, s.rss[n]) for s in tail]):+.1f} / "
            f"{slope_mb_per_min([(s.at, s.rss[n]) for s in half]):+.1f} MB per minute |"
        )
        steady.append(w.name)
        grew = last - first
        heap = [(at - t0, e["heap_mb"]) for at, e in w.memtrace if "heap_mb" in e]
        heap = [(at, float(mb)) for at, mb in heap if at >= tail[0].at]
        if heap:
            lines.append(
                f"| {label(w)}: Python heap (tracemalloc) from warm to the end | "
                f"{heap[0][1]:.1f} → {heap[-1][1]:.1f} MB |"
            )
            if abs(heap[-1][1] - heap[0][1]) < max(5.0, grew / 10):
                findings.append(
                    f"{w.name}: RSS {grew:+.0f} MB from warm to the end while the Python heap"
                    f" moved {heap[-1][1] - heap[0][1]:+.1f} MB: the growth is held below Python"
                    " (the C allocator, torch), not by objects the worker keeps."
                )
            else:
                findings.append(
                    f"{w.name}: the Python heap grew {heap[-1][1] - heap[0][1]:+.1f} MB from"
                    " warm to the end: objects are kept (the worker's memtrace lines name the"
                    " source lines)."
                )
        trims = [
            (float(e["rss_mb"]), float(e["rss_trimmed_mb"]))
            for at, e in w.memtrace
            if "rss_trimmed_mb" in e and at - t0 >= tail[0].at
        ]
        if trims:
            freed = [before - after for before, after in trims]
            lines.append(
                f"| {label(w)}: RSS handed back by malloc_trim(0), mean and last of"
                f" {len(trims)} readings | {sum(freed) / len(freed):.0f} MB; "
                f"{trims[-1][0]:.0f} → {trims[-1][1]:.0f} MB |"
            )
    halves: list[float] = []
    for n, w in enumerate(workers):
        warm = warm_index(samples, n, args.warm_up)
        if w.name not in steady or warm is None:
            continue
        before = [s.rss[n] for s in samples if not s.torch[n]]
        tail = samples[warm:]
        half = tail[len(tail) // 2 :]
        halves.append(slope_mb_per_min([(s.at, s.rss[n]) for s in half]))
        span = half[-1].at - half[0].at
        findings.append(
            f"{w.name}: {before[-1] if before else float('nan'):.0f} MB before the embedder,"
            f" {tail[0].rss[n]:.0f} MB warm ({tail[0].at:.0f} s), {tail[-1].rss[n]:.0f} MB at"
            f" the end; {halves[-1]:+.1f} MB per minute over the last {span:.0f} s."
        )
    if halves and len(halves) == len(workers):
        third = samples[len(samples) // 3].at
        verdict = (
            "flat once the embedder is loaded and warm"
            if max(abs(h) for h in halves) < 2
            else "still growing after the embedder is loaded and warm"
        )
        findings.append(
            f"Memory is {verdict}. Loading the embedder is a step of a few hundred MB that takes"
            " tens of seconds and happens at a worker's first steward run, which may come late:"
            f" a comparison from a fixed point (a third of the way in, {third:.0f} s here, as this"
            " section did before) shows a worker still loading there as growth."
        )
    lines += [
        "",
        "RSS over time (MB; * once the worker has loaded the embedder):",
        "",
        "| s | " + " | ".join(label(w) for w in workers) + " | facts embedded |",
        "|---:|" + "---:|" * len(workers) + "---:|",
    ]
    every = max(1, round(30 / args.sample_every))  # a row every 30 s, and the last
    shown = [s for n, s in enumerate(samples) if n % every == 0 or n == len(samples) - 1]
    for s in shown:
        cells = [f"{r:.0f}{'*' if t else ''}" for r, t in zip(s.rss, s.torch, strict=True)]
        lines.append(f"| {s.at:.0f} | " + " | ".join(cells) + f" | {s.embedded} |")
    lines += [
        "",
        *(f"- {f}" for f in findings),
        "",
        "| run status | error | runs |",
        "|---|---|---:|",
        *[f"| {s} | {e or '-'} | {n} |" for s, e, n in runs],
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
