"""B11: claims and submits against bare PostgreSQL doing the same job, in the same database.

- claim_shadow_run with 200, 2,000 and 20,000 threads ready, against a bare claim over a
  same-sized queue table: `UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1)
  RETURNING`. Each claim is rolled back, so every sample sees the same queue.
- claim_steward_run when there is no steward work (20,000 threads with fresh, not yet idle rows).
- submit_shadow_run of a run with five proposals (two evidence pointers each) at 10k and at 1M
  messages in the table: a submit's evidence checks are lookups by key, so the size of the
  table should not show.

Targets (issue 21): claim <= 5x bare at each size and 20,000 / 200 <= 1.5; steward claim with no
work <= 1 ms; submit <= 5 ms and 1M / 10k <= 1.5.

    .venv/bin/python bench/b11_claims.py [--samples 21]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import statistics
import time

import psycopg
from _support import explain, scratch_database, verdict, write_section

SIZES = (200, 2_000, 20_000)
BARE_DDL = """
CREATE TABLE public.bare_jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    signalled_at timestamptz NOT NULL,
    claimed_by text
);
CREATE INDEX bare_jobs_ready ON public.bare_jobs (signalled_at, id) WHERE claimed_by IS NULL;
"""
BARE_CLAIM = """
UPDATE public.bare_jobs SET claimed_by = 'bench'
WHERE id = (
    SELECT id FROM public.bare_jobs WHERE claimed_by IS NULL
    ORDER BY signalled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED
)
RETURNING *
"""
EMBER_CLAIM = "SELECT ember.claim_shadow_run('bench', '5 minutes')"
STEWARD_CLAIM = "SELECT ember.claim_steward_run('bench', '5 minutes')"


def sample_ms(conn: psycopg.Connection, sql: str, params: tuple[object, ...] = ()) -> float:
    """One statement in its own transaction, rolled back; milliseconds seen by the client."""
    with conn.transaction(force_rollback=True):
        t0 = time.perf_counter()
        conn.execute(sql, params).fetchall()
        return (time.perf_counter() - t0) * 1000


def server_figures(
    conn: psycopg.Connection, sql: str, params: tuple[object, ...] = (), repeat: int = 5
) -> tuple[float, int]:
    """Median server-side execution time (EXPLAIN ANALYZE) and the shared buffers the statement
    touched: the buffer count does not move with the machine's load, so it shows growth plainly."""
    times, hits = [], 0
    for _ in range(repeat):
        with conn.transaction(force_rollback=True):
            text = explain(conn, sql, params)
        took = re.search(r"Execution Time: ([0-9.]+)", text)
        times.append(float(took.group(1)) if took else float("nan"))
        found = re.search(r"Buffers: shared hit=(\d+)(?: read=(\d+))?", text)
        hits = int(found.group(1)) + int(found.group(2) or 0) if found else 0
    return statistics.median(times), hits


def paired(conn: psycopg.Connection, a: str, b: str, samples: int) -> tuple[float, float]:
    """Medians of two statements sampled alternately, so both see the same machine."""
    xs, ys = [], []
    for _ in range(samples):
        xs.append(sample_ms(conn, a))
        ys.append(sample_ms(conn, b))
    return statistics.median(xs), statistics.median(ys)


def grow_ready(conn: psycopg.Connection, start: int, stop: int) -> None:
    """Threads start+1 .. stop, each with one human row and a task-ended offer (the host API)."""
    with conn.transaction():
        conn.execute(
            "SELECT ember.create_thread('default', 'c' || i, 'side') FROM generate_series(%s::int, %s::int) AS i",
            (start + 1, stop),
        )
        conn.execute(
            "SELECT ember.append_message('default', 'c' || i, 'user', 'I prefer tea number ' || i || '.', 'human')"
            " FROM generate_series(%s::int, %s::int) AS i",
            (start + 1, stop),
        )
        conn.execute(
            "SELECT ember.task_ended('default', 'c' || i) FROM generate_series(%s::int, %s::int) AS i",
            (start + 1, stop),
        )
        conn.execute(
            "INSERT INTO public.bare_jobs (signalled_at)"
            " SELECT now() + i * interval '1 microsecond' FROM generate_series(%s::int, %s::int) AS i",
            (start + 1, stop),
        )


HISTORY = """
SET session_replication_role = replica;
INSERT INTO ember.threads (id, kind, created_at, status_changed_at)
SELECT 'h' || i || '_' || %(tag)s, 'side', now() - interval '2 days', now() - interval '2 days'
FROM generate_series(1, %(threads)s) AS i;
INSERT INTO ember.generations (thread_id, ordinal, started_at)
SELECT 'h' || i || '_' || %(tag)s, 1, now() - interval '2 days' FROM generate_series(1, %(threads)s) AS i;
INSERT INTO ember.messages (seq, thread_id, generation_id, role, author, content, episode_id, created_at)
SELECT nextval('ember.message_seq'), g.thread_id, g.id,
       CASE WHEN k %% 2 = 0 THEN 'user' ELSE 'assistant' END,
       CASE WHEN k %% 2 = 0 THEN 'human' ELSE 'agent' END,
       'message ' || k || ' of ' || g.thread_id || ': some ordinary conversation text of a realistic length',
       '00000000-0000-0000-0000-00000000d1e5'::uuid, g.started_at + k * interval '1 second'
FROM ember.generations AS g
CROSS JOIN generate_series(1, %(per_thread)s) AS k
WHERE g.thread_id LIKE 'h%%\\_' || %(tag)s;
RESET session_replication_role
"""


def add_history(conn: psycopg.Connection, messages: int, tag: str) -> None:
    """`messages` digested rows in other threads, written set-based (triggers off): they only
    make the table large, as a long-lived deployment's is."""
    threads = max(1, messages // 100)
    with conn.transaction():
        for statement in HISTORY.split(";\n"):
            if statement.strip():
                conn.execute(
                    statement, {"threads": threads, "per_thread": messages // threads, "tag": tag}
                )


def submit_plan(conn: psycopg.Connection) -> tuple[int, str, str]:
    """A committed running run on thread 'sub' (ten human rows), and the outcome to submit."""
    with conn.transaction():
        conn.execute("SELECT ember.create_thread('default', 'sub', 'side')")
        ids = [
            conn.execute(
                "SELECT ember.append_message('default', 'sub', 'user', %s, 'human')",
                (f"I like item {i} best.",),
            ).fetchone()[0]  # type: ignore[index]
            for i in range(10)
        ]
        conn.execute("SELECT ember.task_ended('default', 'sub')")
    # The other offers stay; take the claim for 'sub' alone by parking the rest for a moment.
    with conn.transaction():
        conn.execute(
            "UPDATE ember.shadow_offers SET parked_until = 'infinity', parked_reason = 'bench'"
            " WHERE thread_id <> 'sub'"
        )
        plan = conn.execute(EMBER_CLAIM).fetchone()[0]  # type: ignore[index]
        conn.execute(
            "UPDATE ember.shadow_offers SET parked_until = NULL, parked_reason = NULL"
            " WHERE parked_reason = 'bench'"
        )
    assert plan and plan["thread_id"] == "sub", plan
    proposals = [
        {
            "text": f"The user likes item {i} best.",
            "evidence_kind": "user-stated",
            "evidence": [{"message_id": ids[2 * i]}, {"message_id": ids[2 * i + 1]}],
        }
        for i in range(5)
    ]
    outcome = {
        "status": "completed",
        "error": None,
        "usage": {
            "input_tokens": 1000,
            "cache_read_input_tokens": 0,
            "cache_creation_5m_input_tokens": 0,
            "cache_creation_1h_input_tokens": 0,
            "output_tokens": 50,
        },
        "latency_ms": 10,
        "proposals": proposals,
    }
    return int(plan["run_id"]), str(plan["lease_token"]), json.dumps(outcome)


def vacuum(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as other:
        other.execute("VACUUM ANALYZE")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=21)
    parser.add_argument(
        "--large", type=int, default=1_000_000, help="messages for the large submit"
    )
    args = parser.parse_args()
    samples = args.samples
    load0 = os.getloadavg()
    claims: dict[int, tuple[float, float]] = {}
    claim_server: dict[int, tuple[float, int]] = {}
    bare_server: dict[int, tuple[float, int]] = {}
    with scratch_database("ember_bench_b11") as url, psycopg.connect(url) as conn:
        with conn.transaction():
            conn.execute("SELECT ember.create_thread('default', 'main', 'main')")
            conn.execute("SELECT ember.ensure_steward_thread('default')")
            conn.execute("SELECT ember.shadow_activate()")
            for statement in BARE_DDL.split(";\n"):
                if statement.strip():
                    conn.execute(statement)
        made = 0
        for size in SIZES:
            grow_ready(conn, made, size)
            made = size
            vacuum(url)
            ready = conn.execute("SELECT count(*) FROM ember.shadow_offers").fetchone()[0]  # type: ignore[index]
            assert ready == size, (ready, size)
            claims[size] = paired(conn, EMBER_CLAIM, BARE_CLAIM, samples)
            claim_server[size] = server_figures(conn, EMBER_CLAIM)
            bare_server[size] = server_figures(conn, BARE_CLAIM)
            print(
                f"B11 claim, {size:>6} ready: claim_shadow_run {claims[size][0]:.3f} ms, "
                f"bare {claims[size][1]:.3f} ms, {claims[size][0] / claims[size][1]:.2f}x; "
                f"in the server {claim_server[size][0]:.3f} / {bare_server[size][0]:.3f} ms, "
                f"{claim_server[size][1]} / {bare_server[size][1]} buffers"
            )
        with conn.transaction(force_rollback=True):
            plan_text = explain(conn, EMBER_CLAIM)
        steward = statistics.median(sample_ms(conn, STEWARD_CLAIM) for _ in range(samples))
        steward_server = server_figures(conn, STEWARD_CLAIM)
        has_work = conn.execute("SELECT ember.steward_has_work()").fetchone()[0]  # type: ignore[index]
        assert not has_work
        print(
            f"B11 claim_steward_run, no steward work, {SIZES[-1]} fresh threads: {steward:.3f} ms"
            f" ({steward_server[0]:.3f} ms in the server, {steward_server[1]} buffers)"
        )

        run_id, token, outcome = submit_plan(conn)
        submit_sql = "SELECT ember.submit_shadow_run('default', %s, %s, %s::jsonb)"
        submits: dict[str, float] = {}
        submit_server: dict[str, tuple[float, int]] = {}
        total = conn.execute("SELECT count(*) FROM ember.messages").fetchone()[0]  # type: ignore[index]
        add_history(conn, max(0, 10_000 - int(total)), "s")
        for label, want in (("10k", 10_000), ("1M", args.large)):
            have = conn.execute("SELECT count(*) FROM ember.messages").fetchone()[0]  # type: ignore[index]
            if have < want:
                add_history(conn, want - int(have), label)
            conn.commit()
            vacuum(url)
            have = conn.execute("SELECT count(*) FROM ember.messages").fetchone()[0]  # type: ignore[index]
            result = None
            times = []
            for _ in range(samples):
                with conn.transaction(force_rollback=True):
                    t0 = time.perf_counter()
                    result = conn.execute(submit_sql, (run_id, token, outcome)).fetchone()
                    times.append((time.perf_counter() - t0) * 1000)
            assert result is not None and result[0]["valid"] == 5, result
            submits[label] = statistics.median(times)
            submit_server[label] = server_figures(conn, submit_sql, (run_id, token, outcome))
            print(
                f"B11 submit_shadow_run, {have:,} messages: {submits[label]:.3f} ms"
                f" ({submit_server[label][0]:.3f} ms in the server,"
                f" {submit_server[label][1]} buffers)"
            )
    load1 = os.getloadavg()

    def ratio_line(size: int) -> str:
        ember, bare = claims[size]
        r = ember / bare
        (es, eb), (bs, bb) = claim_server[size], bare_server[size]
        return (
            f"| {size:,} | {ember:.3f} ms | {bare:.3f} ms | {r:.2f}x | {verdict(r, 5.0)} "
            f"| {es:.3f} / {bs:.3f} ms | {eb} / {bb} |"
        )

    growth = claims[SIZES[-1]][0] / claims[SIZES[0]][0]
    sub_ratio = submits["1M"] / submits["10k"]
    lines = [
        "## B11: claims and submits against bare PostgreSQL",
        "",
        f"Load average {load0[0]:.2f} at the start, {load1[0]:.2f} at the end. Medians of "
        f"{samples} samples, each statement in its own rolled-back transaction, the Ember and "
        "the bare statement sampled alternately in the same database.",
        "",
        "| threads ready | claim_shadow_run | bare SKIP LOCKED claim | ratio | target <= 5x "
        "| in the server, Ember / bare | shared buffers, Ember / bare |",
        "|---|---|---|---|---|---|---|",
        *(ratio_line(size) for size in SIZES),
        "",
        f"- claim growth, {SIZES[-1]:,} / {SIZES[0]} ready: {growth:.2f} (target <= 1.5: "
        f"{verdict(growth, 1.5)})",
        f"- `claim_steward_run` with no steward work ({SIZES[-1]:,} threads with fresh rows): "
        f"{steward:.3f} ms at the client, {steward_server[0]:.3f} ms in the server, "
        f"{steward_server[1]} buffers (target <= 1 ms: {verdict(steward, 1.0)})",
        f"- `submit_shadow_run`, five proposals with two pointers each: {submits['10k']:.3f} ms at "
        f"10k messages, {submits['1M']:.3f} ms at {args.large:,} (target <= 5 ms: "
        f"{verdict(max(submits.values()), 5.0)}); ratio {sub_ratio:.2f} (target <= 1.5: "
        f"{verdict(sub_ratio, 1.5)}); in the server {submit_server['10k'][0]:.3f} and "
        f"{submit_server['1M'][0]:.3f} ms, {submit_server['10k'][1]} and "
        f"{submit_server['1M'][1]} shared buffers",
        "",
        f"EXPLAIN (ANALYZE, BUFFERS) of the claim at {SIZES[-1]:,} ready:",
        "",
        "```",
        plan_text,
        "```",
        "",
    ]
    write_section("b11", "\n".join(lines))
    print(f"B11 claim growth {growth:.2f}; submit 1M/10k {sub_ratio:.2f}")
    _ = dt
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
