"""B5: comparison_summary at 100,000 proposals and 100,000 facts against 10,000 each.

Target: the large run takes at most 15 times the small one (linear in the data is 10x; the
summary joins pointers both ways and normalizes every text, so anything worse than linear shows
up here). EXPLAIN (ANALYZE, BUFFERS) of the summary and of the two heavy queries inside it (exact
and evidence pairs) is saved under bench/out/b5_explain_*.txt.

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

from ember.config import database_url
from ember.devsetup import drop_database, fresh_database
from ember.embedded import project_root

OUT = Path(__file__).resolve().parent / "out"
TARGET = 15.0
REPEAT = 3
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
SELECT ember.current_generation(ember.ensure_steward_thread()), '{}', '{}', 0,
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


def measure(label: str, n: int) -> tuple[float, dict[str, object]]:
    base = database_url()
    name = f"ember_bench_b5_{label}"
    url, _ = fresh_database(base, name, root=project_root(), pgtap=False)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            started = time.perf_counter()
            params = {"n": n, "threads": max(1, n // THREADS_PER_ITEM), "t0": T0}
            with conn.transaction():
                for statement in filter(None, (s.strip() for s in GENERATE.split(";\n"))):
                    conn.execute(statement, params)
            generated = time.perf_counter() - started
            conn.execute(SUMMARY).fetchall()  # warm the cache once
            times = []
            for _ in range(REPEAT):
                t = time.perf_counter()
                row = conn.execute(SUMMARY).fetchone()
                times.append(time.perf_counter() - t)
            ms = statistics.median(times) * 1000
            assert row is not None
            OUT.mkdir(parents=True, exist_ok=True)
            # The functions run with SET work_mem = '64MB'; their queries explained alone do too.
            conn.execute("SET work_mem = '64MB'")
            plans = {
                "summary": explain(conn, SUMMARY),
                "exact": explain(
                    conn, function_query(conn, "ember.comparison_exact(timestamptz, timestamptz)")
                ),
                "evidence": explain(
                    conn,
                    function_query(conn, "ember.comparison_evidence(timestamptz, timestamptz)"),
                ),
            }
            for part, plan in plans.items():
                (OUT / f"b5_explain_{label}_{part}.txt").write_text(plan + "\n")
            figures: dict[str, object] = {
                "proposals": row[2],
                "facts": row[6],
                "exact": row[8],
                "evidence": row[10],
                "generate_s": round(generated, 1),
            }
            return ms, figures
    finally:
        drop_database(base, name)


def main() -> int:
    results = {}
    for label, n in SIZES:
        ms, figures = measure(label, n)
        results[label] = (n, ms, figures)
        print(
            f"B5 {label}: {n:,} proposals and facts: comparison_summary {ms:,.0f} ms (median of "
            f"{REPEAT}); {figures}"
        )
    ratio = results["large"][1] / results["small"][1]
    verdict = "meets" if ratio <= TARGET else "MISSES"
    print(f"B5 ratio large/small: {ratio:.1f} (target <= {TARGET:.0f}): {verdict}")
    lines = [
        "## B5: comparison_summary with the data's size",
        "",
        "| size | proposals, facts | comparison_summary, median of 3 | exact / evidence coverage |",
        "|---|---|---|---|",
    ]
    for label, (n, ms, figures) in results.items():
        lines.append(
            f"| {label} | {n:,} each | {ms:,.0f} ms | {figures['exact']} / {figures['evidence']} |"
        )
    lines += [
        "",
        f"Ratio large / small: **{ratio:.1f}** (target <= {TARGET:.0f}: {verdict}). 1% of the "
        "threads are isolated and left out; 10% of the proposals are rejected. EXPLAIN (ANALYZE, "
        "BUFFERS) plans: `bench/out/b5_explain_{small,large}_{summary,exact,evidence}.txt`.",
    ]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "b5.md").write_text("\n".join(lines) + "\n")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
