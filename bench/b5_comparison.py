"""B5: comparison_summary at 100,000 proposals and 100,000 facts against 10,000 each, and the
whole report `ember compare --json` builds (every item with its statuses, hot against cold, per
thread, the runs, and the evidence of the rows each section shows).

Target: the large run takes at most 15 times the small one, for the summary and for the report
(linear in the data is 10x; the summary joins pointers both ways and normalizes every text, so
anything worse than linear shows up here). EXPLAIN (ANALYZE, BUFFERS) of the summary and of the
two heavy queries inside it (exact and evidence pairs) is saved under bench/out/b5_explain_*.txt.

The data is generated set-based in SQL with triggers off (session_replication_role = replica):
1% of the threads are isolated, each proposal and fact cites one human message of its thread,
a third of the facts repeat their proposal's text in other case and punctuation (exact), the
rest are reworded (evidence neighbours only), and 10% of the proposals are rejected.

Standalone: `python bench/b5_comparison.py` with the server of `ember.config.database_url()`.
"""

from __future__ import annotations

import datetime as dt
import re
import statistics
import sys
import time
from pathlib import Path

import psycopg

from ember.comparison.report import collect, read_only
from ember.config import database_url
from ember.devsetup import drop_database, fresh_database
from ember.embedded import project_root

OUT = Path(__file__).resolve().parent / "out"
TARGET = 15.0
REPEAT = 5
REPORT_REPEAT = 3
SIZES = [("small", 10_000), ("large", 100_000)]
THREADS_PER_ITEM = 100  # one thread per 100 items
T0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)  # a typed parameter: timestamptz

GENERATE = """
SET session_replication_role = replica;
INSERT INTO ember.threads (id, kind, seal_tier)
SELECT 'th' || i, 'side', CASE WHEN i %% 100 = 0 THEN 'isolated' ELSE 'open' END
FROM generate_series(1, %(threads)s) AS i;
INSERT INTO ember.generations (thread_id, ordinal, started_at)
SELECT 'th' || i, 1, %(t0)s FROM generate_series(1, %(threads)s) AS i;
INSERT INTO ember.messages (seq, thread_id, generation_id, role, author, content, created_at)
SELECT i, g.thread_id, g.id, 'user', 'human', 'statement ' || i, %(t0)s
FROM generate_series(1, %(n)s) AS i
JOIN ember.generations AS g ON g.thread_id = 'th' || (1 + i %% %(threads)s);
INSERT INTO ember.shadow_runs (
    thread_id, generation_id, path, model, status, from_seq, through_seq, input_tokens,
    output_tokens, price_as_of, price_input, price_output, price_cache_write_5m,
    price_cache_write_1h, price_cache_read, started_at, finished_at, latency_ms, worker,
    lease_token, lease_expires_at
)
SELECT g.thread_id, g.id, CASE WHEN random() < 0.5 THEN 'hot' ELSE 'cold' END,
       'claude-haiku-4-5', 'completed', 0, 0, 20000, 500, '2026-11-30', 1, 5, 1.25, 2, 0.1,
       %(t0)s, %(t0)s + interval '2 seconds', 1000 + (random() * 4000)::int,
       'bench', gen_random_uuid(), %(t0)s + interval '10 minutes'
FROM ember.generations AS g;
INSERT INTO ember.shadow_proposals (
    run_id, thread_id, generation_id, ordinal, text, evidence_kind, evidence, validation_error,
    created_at
)
SELECT r.id, m.thread_id, m.generation_id, m.id::int,
       'The user prefers option ' || m.id || '.', 'user-stated',
       jsonb_build_array(jsonb_build_object('message_id', m.id)),
       CASE WHEN m.id %% 10 = 0 THEN 'pointer 1 (message ' || m.id || '): not in thread "x"' END,
       %(t0)s + (m.id %% 7) * interval '1 day'
FROM ember.messages AS m
JOIN ember.shadow_runs AS r ON r.generation_id = m.generation_id;
INSERT INTO ember.facts (text, evidence_kind, created_at)
SELECT CASE WHEN i %% 3 = 0 THEN 'the user PREFERS option ' || i
            ELSE 'Option ' || i || ' is what the user likes' END,
       'user-stated', %(t0)s + (i %% 7) * interval '1 day'
FROM generate_series(1, %(n)s) AS i;
INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id)
SELECT f.id, 1, f.id FROM ember.facts AS f;
INSERT INTO ember.steward_runs (
    generation_id, read_message_ids, read_generations, read_tokens, model, status,
    input_tokens, output_tokens, price_as_of, price_input, price_output,
    price_cache_write_5m, price_cache_write_1h, price_cache_read, started_at, finished_at,
    latency_ms, worker, lease_token, lease_expires_at
)
SELECT ember.current_generation('default', ember.ensure_steward_thread('default')), '{}', '{}', 0,
       'claude-haiku-4-5', 'completed', 80000, 3000, '2026-11-30', 1, 5, 1.25, 2, 0.1, %(t0)s,
       %(t0)s + interval '1 minute', 20000 + (random() * 40000)::int, 'bench', gen_random_uuid(),
       %(t0)s + interval '10 minutes'
FROM generate_series(1, %(n)s / 100);
SET session_replication_role = DEFAULT;
ANALYZE;
"""

WINDOW = "timestamptz, timestamptz"
SUMMARY = "SELECT * FROM ember.comparison_summary(NULL, NULL)"


def function_query(conn: psycopg.Connection, signature: str) -> str:
    """The RETURN QUERY of a comparison function, with its window left open (NULL)."""
    row = conn.execute("SELECT pg_get_functiondef(%s::regprocedure)", (signature,)).fetchone()
    assert row is not None
    text = str(row[0])
    start = text.index("RETURN QUERY") + len("RETURN QUERY")
    end = text.index(";\nEND;", start)
    return re.sub(r"\bp_(since|until)\b", "NULL::timestamptz", text[start:end])


def explain(conn: psycopg.Connection, statement: str) -> str:
    rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + statement).fetchall()
    return "\n".join(str(r[0]) for r in rows)


def build(label: str, n: int) -> tuple[str, float]:
    """A scratch database holding n proposals and n facts; its URL and seconds to generate."""
    url, _ = fresh_database(
        database_url(), f"ember_bench_b5_{label}", root=project_root(), pgtap=False
    )
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        params = {"n": n, "threads": max(1, n // THREADS_PER_ITEM), "t0": T0}
        with conn.transaction():
            for statement in filter(None, (s.strip() for s in GENERATE.split(";\n"))):
                conn.execute(statement, params)
        conn.execute(SUMMARY).fetchall()  # warm the cache once
        return url, time.perf_counter() - started


def timed_summary(conn: psycopg.Connection) -> float:
    t = time.perf_counter()
    conn.execute(SUMMARY).fetchone()
    return (time.perf_counter() - t) * 1000


def timed_report(url: str) -> float:
    """The report as `ember compare --json` collects it, on its read-only connection."""
    with read_only(url) as conn:
        t = time.perf_counter()
        report = collect(conn, None, None)
        elapsed = (time.perf_counter() - t) * 1000
    assert report.sections["facts"].count > 0
    return elapsed


def save_plans(conn: psycopg.Connection, label: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    # The functions run with SET work_mem = '64MB'; their queries explained alone do too.
    conn.execute("SET work_mem = '64MB'")
    plans = {"summary": explain(conn, SUMMARY)}
    for part in ("exact", "evidence"):
        query = function_query(conn, f"ember.comparison_{part}(timestamptz, timestamptz)")
        plans[part] = explain(conn, query)
    for part, plan in plans.items():
        (OUT / f"b5_explain_{label}_{part}.txt").write_text(plan + "\n")


def main() -> int:
    base = database_url()
    urls: dict[str, str] = {}
    try:
        for label, n in SIZES:
            urls[label], generated = build(label, n)
            print(f"B5 {label}: {n:,} proposals and {n:,} facts generated in {generated:.1f} s")
        conns = {label: psycopg.connect(url, autocommit=True) for label, url in urls.items()}
        # Interleaved, so both sizes see the same load on a shared machine.
        times: dict[str, list[float]] = {label: [] for label in urls}
        for _ in range(REPEAT):
            for label, conn in conns.items():
                times[label].append(timed_summary(conn))
        row = {label: conn.execute(SUMMARY).fetchone() for label, conn in conns.items()}
        report_times: dict[str, list[float]] = {label: [] for label in urls}
        for _ in range(REPORT_REPEAT):
            for label, url in urls.items():
                report_times[label].append(timed_report(url))
        for label, conn in conns.items():
            save_plans(conn, label)
            conn.close()
    finally:
        for label in urls:
            drop_database(base, f"ember_bench_b5_{label}")

    fastest = {label: min(t) for label, t in times.items()}
    median = {label: statistics.median(t) for label, t in times.items()}
    ratio = fastest["large"] / fastest["small"]
    median_ratio = median["large"] / median["small"]
    verdict = "meets" if ratio <= TARGET else "MISSES"
    report_fastest = {label: min(t) for label, t in report_times.items()}
    report_ratio = report_fastest["large"] / report_fastest["small"]
    report_verdict = "meets" if report_ratio <= TARGET else "MISSES"
    for label, _ in SIZES:
        r = row[label]
        assert r is not None
        print(
            f"B5 {label}: comparison_summary fastest {fastest[label]:,.0f} ms, median "
            f"{median[label]:,.0f} ms of {REPEAT}; exact {r[8]}, evidence {r[10]} coverage"
        )
    print(
        f"B5 ratio large/small: {ratio:.1f} fastest, {median_ratio:.1f} median "
        f"(target <= {TARGET:.0f}): {verdict}"
    )
    for label, _ in SIZES:
        print(
            f"B5 {label}: the whole report fastest {report_fastest[label]:,.0f} ms "
            f"of {REPORT_REPEAT}"
        )
    print(
        f"B5 report ratio large/small: {report_ratio:.1f} "
        f"(target <= {TARGET:.0f}): {report_verdict}"
    )
    lines = [
        "## B5: comparison_summary with the data's size",
        "",
        f"| size | proposals, facts | fastest of {REPEAT} | median of {REPEAT} |",
        "|---|---|---|---|",
    ]
    for label, n in SIZES:
        lines.append(
            f"| {label} | {n:,} each | {fastest[label]:,.0f} ms | {median[label]:,.0f} ms |"
        )
    lines += [
        "",
        f"Ratio large / small: **{ratio:.1f}** of the fastest runs, {median_ratio:.1f} of the "
        f"medians (target <= {TARGET:.0f}: {verdict}). The runs alternate between the sizes so "
        "both see the same load; on a shared machine load only adds time, so the fastest run is "
        "the closer measure of the work. 1% of the threads are isolated and left out; 10% of the "
        "proposals are rejected. EXPLAIN (ANALYZE, BUFFERS) plans: "
        "`bench/out/b5_explain_{small,large}_{summary,exact,evidence}.txt`.",
        "",
        f"The whole report (`ember compare --json`'s queries: every item with its statuses, hot "
        f"against cold, per thread, the runs, and the rendered evidence of the rows each section "
        f"shows), fastest of {REPORT_REPEAT}:",
        "",
        "| size | report |",
        "|---|---|",
    ]
    for label, _ in SIZES:
        lines.append(f"| {label} | {report_fastest[label]:,.0f} ms |")
    lines += [
        "",
        f"Ratio large / small: **{report_ratio:.1f}** (target <= {TARGET:.0f}: {report_verdict}).",
    ]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "b5.md").write_text("\n".join(lines) + "\n")
    return 0 if ratio <= TARGET and report_ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
