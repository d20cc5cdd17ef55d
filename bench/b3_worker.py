"""B3: worker overhead against `ember sim` with zero model latency.

Runs per second and worker CPU per run at concurrency 1, 4 and 16 (cold runs of one row each, so
the model side costs next to nothing), NOTIFY-to-request latency p50/p95 (an offer committed to
the simulator receiving the call), and the worker's peak RSS.
Targets on a 2-core machine: >= 100 runs/s at concurrency 16, p95 <= 50 ms, RSS <= 200 MB.

    .venv/bin/python bench/b3_worker.py [--runs 200] [--samples 60]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from _worker_common import (
    cpu_seconds,
    drop_scratch,
    machine,
    peak_rss_mb,
    percentile,
    scratch_database,
    start_worker,
    stop_worker,
    wait_count,
    write_section,
)

from ember.sim import SimServer

DB = "ember_bench_b3"


def offer_many(url: str, threads: list[str]) -> None:
    """One row and one offer per thread, all committed together (one NOTIFY)."""
    with psycopg.connect(url) as conn:
        for t in threads:
            conn.execute(
                "SELECT ember.append_message('default', %s, 'user', %s, 'human')", (t, f"I prefer {t}.")
            )
            conn.execute("SELECT ember.task_ended('default', %s)", (t,))


def throughput(
    url: str, sim: SimServer, concurrency: int, runs: int, round_no: int
) -> dict[str, float]:
    threads = [f"t{i}" for i in range(runs)]
    if round_no == 0:
        with psycopg.connect(url) as conn:
            for t in threads:
                conn.execute("SELECT ember.create_thread('default', %s, 'side')", (t,))
    proc = start_worker(
        url, sim.base_url, "--concurrency", str(concurrency), "--poll-interval", "30"
    )
    try:
        cpu0 = cpu_seconds(proc.pid)
        t0 = time.monotonic()
        offer_many(url, threads)
        wait_count(
            url,
            "SELECT count(*) FROM ember.shadow_runs WHERE status = 'completed'",
            runs * (round_no + 1),
        )
        elapsed = time.monotonic() - t0
        cpu = cpu_seconds(proc.pid) - cpu0
        rss = peak_rss_mb(proc.pid)
    finally:
        stop_worker(proc)
    return {"runs_per_s": runs / elapsed, "cpu_ms_per_run": cpu / runs * 1000, "rss_mb": rss}


def steady(url: str, sim: SimServer, concurrency: int, runs: int, prefix: str) -> dict[str, float]:
    """Offers fed as runs finish, so about twice `concurrency` threads stand ready at any time:
    the worker's own overhead, without the cost of a claim over a large backlog."""
    threads = [f"{prefix}{i}" for i in range(runs)]
    with psycopg.connect(url) as conn:
        for t in threads:
            conn.execute("SELECT ember.create_thread('default', %s, 'side')", (t,))
    proc = start_worker(
        url, sim.base_url, "--concurrency", str(concurrency), "--poll-interval", "30"
    )
    done_sql = (
        "SELECT count(*) FROM ember.shadow_runs WHERE status = 'completed' AND thread_id LIKE %s"
    )
    try:
        cpu0 = cpu_seconds(proc.pid)
        t0 = time.monotonic()
        offered = 0
        with psycopg.connect(url, autocommit=True) as conn:
            while True:
                row = conn.execute(done_sql, (prefix + "%",)).fetchone()
                done = int(row[0]) if row else 0
                if done >= runs:
                    break
                want = min(runs, done + 2 * concurrency) - offered
                if want > 0:
                    offer_many(url, threads[offered : offered + want])
                    offered += want
                time.sleep(0.005)
        elapsed = time.monotonic() - t0
        cpu = cpu_seconds(proc.pid) - cpu0
        rss = peak_rss_mb(proc.pid)
    finally:
        stop_worker(proc)
    return {"runs_per_s": runs / elapsed, "cpu_ms_per_run": cpu / runs * 1000, "rss_mb": rss}


def notify_latency(url: str, sim: SimServer, samples: int) -> list[float]:
    with psycopg.connect(url, autocommit=True) as conn:
        for i in range(samples):
            conn.execute("SELECT ember.create_thread('default', %s, 'side')", (f"n{i}",))
    proc = start_worker(url, sim.base_url, "--concurrency", "4", "--poll-interval", "30")
    latencies: list[float] = []
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            for i in range(samples):
                sim.reset()
                with conn.transaction():
                    conn.execute(
                        "SELECT ember.append_message('default', %s, 'user', 'I prefer tea.', 'human')",
                        (f"n{i}",),
                    )
                    conn.execute("SELECT ember.task_ended('default', %s)", (f"n{i}",))
                committed = time.time()
                (entry,) = sim.wait_for_requests(1, timeout=10)
                latencies.append((entry.received_at - committed) * 1000)
                wait_count(
                    url,
                    "SELECT count(*) FROM ember.shadow_runs"
                    f" WHERE thread_id = 'n{i}' AND status <> 'running'",
                    1,
                )
        rss = peak_rss_mb(proc.pid)
    finally:
        stop_worker(proc)
    latencies.append(-rss)  # carried out below
    return latencies


BARE_DDL = """
CREATE TABLE IF NOT EXISTS public.bare_jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    signalled_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    prompt text NOT NULL,
    claimed_by text
);
CREATE INDEX IF NOT EXISTS bare_jobs_ready ON public.bare_jobs (signalled_at, id)
WHERE claimed_by IS NULL;
CREATE TABLE IF NOT EXISTS public.bare_results (
    job_id bigint PRIMARY KEY, answer text NOT NULL, input_tokens bigint NOT NULL
)
"""


def bare_loop(url: str, sim: SimServer, concurrency: int, runs: int) -> dict[str, float]:
    """The bare worker loop (bench/_bare_worker.py) over `runs` queued jobs, in its own process:
    claim, one POST to the same simulator, one INSERT. Runs per second and CPU per run."""
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in BARE_DDL.split(";\n"):
            conn.execute(statement)
        conn.execute(
            "INSERT INTO public.bare_jobs (prompt)"
            " SELECT 'I prefer tea number ' || i || '.' FROM generate_series(1, %s) AS i",
            (runs,),
        )
    script = Path(__file__).resolve().parent / "_bare_worker.py"
    out = subprocess.run(
        [sys.executable, str(script), url, sim.base_url, str(concurrency)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    figures = json.loads(out.strip().splitlines()[-1])
    assert figures["runs"] == runs, figures
    return {
        "runs_per_s": runs / figures["elapsed"],
        "cpu_ms_per_run": figures["cpu"] / runs * 1000,
    }


def claim_cost(url: str, ready: int) -> float:
    """Median ms of one claim_shadow_run with `ready` threads offered (rolled back each time)."""
    with psycopg.connect(url) as conn:
        for i in range(ready):
            conn.execute("SELECT ember.create_thread('default', %s, 'side')", (f"c{i}",))
            conn.execute(
                "SELECT ember.append_message('default', %s, 'user', 'I prefer tea.', 'human')", (f"c{i}",)
            )
            conn.execute("SELECT ember.task_ended('default', %s)", (f"c{i}",))
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            conn.execute("SELECT ember.claim_shadow_run('bench', '5 minutes')")
            times.append((time.perf_counter() - t0) * 1000)
        conn.rollback()
    return percentile(times, 0.5)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=200, help="runs per concurrency level")
    parser.add_argument("--samples", type=int, default=60, help="NOTIFY latency samples")
    args = parser.parse_args()

    url = scratch_database(DB)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SELECT ember.create_thread('default', 'main', 'main')")
            conn.execute("SELECT ember.shadow_activate()")
        claim_ms = claim_cost(url, args.runs)
        print(f"B3 claim_shadow_run with {args.runs} threads ready: {claim_ms:.1f} ms (SQL alone)")
        results: dict[int, dict[str, float]] = {}
        with SimServer(responder="heuristic") as sim:
            for round_no, c in enumerate((1, 4, 16)):
                sim.reset()
                results[c] = throughput(url, sim, c, args.runs, round_no)
                print(
                    f"B3 concurrency {c:2d}: {results[c]['runs_per_s']:.1f} runs/s, "
                    f"{results[c]['cpu_ms_per_run']:.2f} ms worker CPU per run, "
                    f"peak RSS {results[c]['rss_mb']:.0f} MB"
                )
            steady_results: dict[int, dict[str, float]] = {}
            for c in (1, 4, 16):
                sim.reset()
                steady_results[c] = steady(url, sim, c, args.runs, f"s{c}_")
                print(
                    f"B3 steady, concurrency {c:2d}: {steady_results[c]['runs_per_s']:.1f} runs/s, "
                    f"{steady_results[c]['cpu_ms_per_run']:.2f} ms worker CPU per run"
                )
            bare: dict[int, dict[str, float]] = {}
            for c in (1, 16):
                sim.reset()
                bare[c] = bare_loop(url, sim, c, args.runs)
                print(
                    f"B3 bare loop, concurrency {c:2d}: {bare[c]['runs_per_s']:.1f} runs/s, "
                    f"{bare[c]['cpu_ms_per_run']:.2f} ms CPU per run"
                )
            lat = notify_latency(url, sim, args.samples)
        lat_rss = -lat.pop()
        p50, p95 = percentile(lat, 0.5), percentile(lat, 0.95)
        rss = max([r["rss_mb"] for r in (*results.values(), *steady_results.values())] + [lat_rss])
        print(
            f"B3 NOTIFY-to-request latency: p50 {p50:.1f} ms, p95 {p95:.1f} ms ({len(lat)} samples)"
        )
        print(f"B3 worker peak RSS: {rss:.0f} MB")
        c16 = steady_results[16]["runs_per_s"]
        cpu_ratio = steady_results[16]["cpu_ms_per_run"] / bare[16]["cpu_ms_per_run"]
        print(f"B3 CPU per run, Ember / bare loop at concurrency 16: {cpu_ratio:.2f}")
        verdict = lambda ok: "meets" if ok else "misses"  # noqa: E731
        lines = [
            "## B3: worker overhead (ember sim, zero model latency)",
            "",
            f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {machine()}; "
            f"{args.runs} cold runs of one row each per level, "
            "the simulator in the benchmark's process.",
            "",
            "| concurrency | backlog | runs/s | worker CPU per run | peak RSS |",
            "|---|---|---|---|---|",
            *(
                f"| {c} | all {args.runs} at once | {r['runs_per_s']:.1f} | "
                f"{r['cpu_ms_per_run']:.2f} ms | {r['rss_mb']:.0f} MB |"
                for c, r in results.items()
            ),
            *(
                f"| {c} | about {2 * c} ready | {r['runs_per_s']:.1f} | "
                f"{r['cpu_ms_per_run']:.2f} ms | {r['rss_mb']:.0f} MB |"
                for c, r in steady_results.items()
            ),
            *(
                f"| {c} | bare loop: claim, one POST, one INSERT | {r['runs_per_s']:.1f} | "
                f"{r['cpu_ms_per_run']:.2f} ms | |"
                for c, r in bare.items()
            ),
            "",
            f"- Ember's worker CPU per run / the bare loop's, concurrency 16: {cpu_ratio:.2f} "
            f"(target <= 2: {verdict(cpu_ratio <= 2)})",
            f"- NOTIFY to request: p50 {p50:.1f} ms, p95 {p95:.1f} ms over {len(lat)} offers "
            f"(target p95 <= 50 ms: {verdict(p95 <= 50)})",
            f"- concurrency 16 with a steady backlog: {c16:.1f} runs/s "
            f"(target >= 100: {verdict(c16 >= 100)})",
            f"- peak RSS {rss:.0f} MB (target <= 200 MB: {verdict(rss <= 200)})",
            f"- one `claim_shadow_run` with {args.runs} threads ready takes "
            f"{claim_ms:.1f} ms in SQL "
            f"alone, a ceiling of {1000 / claim_ms:.0f} claims/s for one claimer; the worker's own "
            "CPU per run is the column above",
            "",
        ]
        path = write_section("b3", "\n".join(lines))
        print(f"B3 written to {path}")
    finally:
        drop_scratch(DB)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
