"""B12: a bounded soak. Thousands of threads append while two workers run every pipeline
against `ember sim`: no error in either worker's log, no lease that lapsed (every run ends by its
own submit or release), and each worker's memory flat between the first and the last sample.

    .venv/bin/python bench/b12_soak.py [--threads 2000] [--seconds 120]
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
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from _worker_common import drop_scratch, machine, scratch_database, write_section

from ember.sim import SimServer

DB = "ember_bench_b11"
EMBER = str(Path(sys.executable).parent / "ember")


class Worker:
    def __init__(self, url: str, base_url: str, name: str) -> None:
        env = {
            **os.environ,
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": "bench",
            "PYTHONUNBUFFERED": "1",
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
            if entry.get("level") in ("error", "critical") or "Traceback" in line:
                self.errors.append(entry.get("msg", line.strip()))

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(120)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=120.0)
    args = ap.parse_args()
    rng = random.Random(10)
    url = scratch_database(DB)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "SELECT ember.create_thread('main', 'main', NULL, NULL, 'open', 'claude-haiku-4-5')"
            )
            conn.execute("SELECT ember.ensure_steward_thread()")
            conn.execute("SELECT ember.shadow_activate()")
            conn.execute(
                "UPDATE ember.settings SET value = '\"0 seconds\"' WHERE key = 'idle_before_digest'"
            )
            for i in range(args.threads):
                conn.execute("SELECT ember.create_thread(%s, 'side')", (f"s{i}",))
        with SimServer(responder="heuristic") as sim:
            workers = [Worker(url, sim.base_url, f"soak{i}") for i in range(2)]
            samples: list[list[float]] = []
            appended = 0
            t0 = time.monotonic()
            next_sample = t0
            with psycopg.connect(url, autocommit=True) as conn:
                while time.monotonic() - t0 < args.seconds:
                    if time.monotonic() >= next_sample:
                        samples.append([w.rss_mb() for w in workers])
                        next_sample += 10
                    with conn.transaction():
                        for _ in range(20):
                            t = f"s{rng.randrange(args.threads)}"
                            human = rng.random() < 0.5
                            conn.execute(
                                "SELECT ember.append_message(%s, %s, %s, %s)",
                                (
                                    t,
                                    "user" if human else "assistant",
                                    f"I prefer tea number {appended}.",
                                    "human" if human else None,
                                ),
                            )
                            conn.execute("SELECT ember.task_ended(%s)", (t,))
                            appended += 1
                    time.sleep(0.05)
            samples.append([w.rss_mb() for w in workers])
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
        # The first samples include loading the embedder (a few hundred MB, once): memory is
        # compared from a third of the way in, when every pipeline has run.
        first, last = samples[len(samples) // 3], samples[-1]
        lines = [
            "## B12: soak",
            "",
            f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {machine()}, load {os.getloadavg()[0]:.2f}.",
            f"{args.threads} threads, {appended} rows appended (half human, each with an offer)"
            f" over {args.seconds:.0f} s while two workers (concurrency 4, shadow and steward)"
            " ran.",
            "",
            "| figure | value |",
            "|---|---|",
            f"| error lines in the workers' logs | {len(errors)} |",
            f"| runs whose lease lapsed | {lapsed} |",
            f"| runs still running after both workers stopped | {running} |",
            f"| worker exit codes | {', '.join(map(str, codes))} |",
            "| worker RSS a third of the way in, and at the end (MB) | "
            + "; ".join(f"{a:.0f} → {b:.0f}" for a, b in zip(first, last, strict=True))
            + " |",
            "",
            "| run status | error | runs |",
            "|---|---|---:|",
            *[f"| {s} | {e or '-'} | {n} |" for s, e, n in runs],
            "",
        ]
        text = "\n".join(lines)
        print(text)
        for e in errors[:10]:
            print("error:", e)
        write_section("b12", text)
    finally:
        drop_scratch(DB)


if __name__ == "__main__":
    main()
