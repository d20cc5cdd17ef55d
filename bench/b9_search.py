"""B9: search_memory against bare PostgreSQL, its recall in Chinese and on questions, over MCP.

Latency. Facts with random unit vectors (384 dimensions) and eight words each from a 5,000-word
Zipf vocabulary (as bench/b6 made them), one in ten labelled, at 1,000, 10,000 and 100,000 facts.
At each size the same searches (three words plus a vector, by a viewer whose model is untagged,
so the label filter runs) go to `ember.search_memory` and to the bare statement: HNSW top 40 by
cosine distance and a GIN match of every word (plainto_tsquery) limited to 40, in one statement,
with no labels, no ranking and no fusion. The two alternate query by query in one connection, so
both see the same load. Figures: p50 and p95 of each at the client, and Ember / bare.

Recall. bench/data/search_zh_partial.json: Chinese facts from the seed documents' sentences with
2-4 character partial queries; answered when the fact is in the first five, without the embedder.
The same queries are run against the alternatives the term design was chosen over: pg_trgm (a
trigram GIN index, `text LIKE '%query%'` ranked by similarity) and the english configuration
alone (the terms before migration 0033). bench/data/search_questions.json: natural-language
questions in English and Chinese, top-5 recall with the embedder off and on (all-MiniLM-L6-v2).

MCP. At 10,000 facts, `ember mcp` over stdio (the MCP Python SDK's client) answers the
same text searches as the SQL function called directly; figure: the ratio of the medians and p95.

    .venv/bin/python bench/b9_search.py [--sizes 1000,10000,100000] [--searches 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from _support import scratch_database, verdict, write_section
from _worker_common import OUT, machine, percentile

DATA = Path(__file__).resolve().parent / "data"
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
WORDS = ["".join(random.Random(i).choices(_SYLLABLES, k=3)) + f"{i % 7}" for i in range(5000)]
WEIGHTS = [1 / (rank + 1) for rank in range(len(WORDS))]
READER_MODEL = "claude-sonnet-4-5"

EMBER_SQL = "SELECT fact_id, text FROM ember.search_memory('default', 'reader', %s, %s::vector, 10)"
# The floor: the two index scans search_memory is built on, in one statement, and nothing else.
BARE_SQL = """
WITH v AS (
    SELECT f.id FROM ember.facts AS f WHERE f.status = 'active'
    ORDER BY f.embedding <=> %(v)s::halfvec LIMIT 40
),
t AS (
    SELECT f.id FROM ember.facts AS f
    WHERE f.search_text @@ plainto_tsquery('english', %(t)s) AND f.status = 'active' LIMIT 40
)
SELECT f.id, f.text FROM ember.facts AS f WHERE f.id IN (SELECT id FROM v UNION SELECT id FROM t)
LIMIT 10
"""


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, weights=WEIGHTS, k=n))


def _vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, 384), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.5f}" for x in vector) + "]"


def _grow(conn: psycopg.Connection[Any], have: int, want: int, rng: random.Random) -> None:
    """Bring the facts to `want`, then rebuild the HNSW index (the migration's definition)."""
    vectors = _vectors(np.random.default_rng(have), want - have)
    conn.execute("DROP INDEX IF EXISTS ember.facts_embedding_hnsw")
    with (
        conn.cursor() as cur,
        cur.copy(
            "COPY ember.facts (text, evidence_kind, categories, embedding) FROM STDIN"
        ) as copy,
    ):
        for i in range(want - have):
            labels = "{health}" if (have + i) % 10 == 0 else "{}"
            text = "The user " + _words(rng, 8) + "."
            copy.write_row((text, "user-stated", labels, _literal(vectors[i])))
    conn.execute("SET maintenance_work_mem = '512MB'")
    conn.execute(
        "CREATE INDEX facts_embedding_hnsw ON ember.facts"
        " USING hnsw (embedding halfvec_cosine_ops) WHERE status = 'active'"
    )
    conn.execute("VACUUM ANALYZE ember.facts")


def _timed(conn: psycopg.Connection[Any], sql: Any, params: Any) -> float:
    t0 = time.perf_counter()
    conn.execute(sql, params).fetchall()
    return (time.perf_counter() - t0) * 1000


def latency(sizes: list[int], searches: int, mcp_at: int) -> dict[str, Any]:
    rng = random.Random(11)
    results: list[dict[str, Any]] = []
    mcp: dict[str, Any] = {}
    with scratch_database("ember_bench_b9") as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT ember.define_category('health')")
        conn.execute(
            "SELECT ember.create_thread('default', 'reader', 'side', NULL, NULL, 'open', %s)",
            (READER_MODEL,),
        )
        have = 0
        for size in sizes:
            started = time.monotonic()
            _grow(conn, have, size, rng)
            have = size
            build_s = time.monotonic() - started
            vectors = _vectors(np.random.default_rng(10_000_000 + size), searches)
            queries = [(_words(rng, 3), _literal(vectors[i])) for i in range(searches)]
            for text, vector in queries[:20]:  # warm caches and the session's plans
                _timed(conn, EMBER_SQL, (text, vector))
                _timed(conn, BARE_SQL, {"t": text, "v": vector})
            ember: list[float] = []
            bare: list[float] = []
            load_before = os.getloadavg()[0]
            for i, (text, vector) in enumerate(queries):
                pair = [
                    (ember, EMBER_SQL, (text, vector)),
                    (bare, BARE_SQL, {"t": text, "v": vector}),
                ]
                for sink, sql, params in pair if i % 2 == 0 else pair[::-1]:
                    sink.append(_timed(conn, sql, params))
            load_after = os.getloadavg()[0]
            results.append(
                {
                    "size": size,
                    "build_s": build_s,
                    "ember": (percentile(ember, 0.5), percentile(ember, 0.95)),
                    "bare": (percentile(bare, 0.5), percentile(bare, 0.95)),
                    "load": (load_before, load_after),
                }
            )
            print(
                f"B9 {size:,} facts: Ember p50 {results[-1]['ember'][0]:.2f} ms p95 "
                f"{results[-1]['ember'][1]:.2f} ms; bare p50 {results[-1]['bare'][0]:.2f} ms "
                f"p95 {results[-1]['bare'][1]:.2f} ms; load {load_before:.1f}/{load_after:.1f}",
                flush=True,
            )
            if size == mcp_at:
                mcp = asyncio.run(_mcp_latency(url, conn, [q for q, _ in queries]))
            if size == sizes[-1]:
                (OUT / "b9_explain.txt").write_text(_explain(conn, *queries[0]))
    return {"sizes": results, "mcp": mcp}


async def _mcp_latency(url: str, conn: psycopg.Connection[Any], texts: list[str]) -> dict[str, Any]:
    """`ember mcp` over stdio against the SQL function called directly, on the same text queries."""
    from mcp import StdioServerParameters
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    sql = "SELECT * FROM ember.search_memory('default', 'reader', %s, NULL, 10)"
    params = StdioServerParameters(
        command=str(Path(sys.executable).parent / "ember"),
        args=["mcp", "--database-url", url, "--viewer", "reader"],
        env={k: v for k, v in os.environ.items() if k != "DATABASE_URL"},
    )
    direct: list[float] = []
    over_mcp: list[float] = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for text in texts[:20]:
            await session.call_tool("search_memory", {"query": text})
            _timed(conn, sql, (text,))
        for i, text in enumerate(texts):
            order = [0, 1] if i % 2 == 0 else [1, 0]
            for which in order:
                if which == 0:
                    direct.append(_timed(conn, sql, (text,)))
                else:
                    t0 = time.perf_counter()
                    result = await session.call_tool("search_memory", {"query": text})
                    over_mcp.append((time.perf_counter() - t0) * 1000)
                    assert not result.is_error, result
    return {
        "direct": (percentile(direct, 0.5), percentile(direct, 0.95)),
        "mcp": (percentile(over_mcp, 0.5), percentile(over_mcp, 0.95)),
    }


def _explain(conn: psycopg.Connection[Any], text: str, vector: str) -> str:
    rows = conn.execute(
        "EXPLAIN (ANALYZE, BUFFERS) " + BARE_SQL,  # type: ignore[operator]
        {"t": text, "v": vector},
    ).fetchall()
    return "-- the bare statement\n" + "\n".join(r[0] for r in rows) + "\n"


# --- recall ---------------------------------------------------------------------------------


def _load_facts(conn: psycopg.Connection[Any], texts: list[str]) -> dict[str, int]:
    ids = {}
    for text in texts:
        row = conn.execute(
            "INSERT INTO ember.facts (text, evidence_kind) VALUES (%s, 'user-stated') RETURNING id",
            (text,),
        ).fetchone()
        assert row is not None
        ids[text] = int(row[0])
    conn.execute("ANALYZE ember.facts")
    return ids


def _recall(
    conn: psycopg.Connection[Any],
    ids: dict[str, int],
    cases: list[tuple[str, str]],
    sql: Any,
    embed: Any = None,
) -> tuple[int, int, float]:
    """(answered, asked, median ms) of (query, fact text) cases; embed(query) adds a vector."""
    hits = 0
    times = []
    # Vectors first: timing a query right after the embedder ran would time torch's worker
    # threads still spinning on both cores, not the database.
    all_params = [(q,) if embed is None else (q, embed(q)) for q, _ in cases]
    for (_, text), params in zip(cases, all_params, strict=True):
        t0 = time.perf_counter()
        found = [r[0] for r in conn.execute(sql, params)]
        times.append((time.perf_counter() - t0) * 1000)
        hits += ids[text] in found
    return hits, len(cases), statistics.median(times)


_ROOT = Path(__file__).resolve().parents[1]
# The seed documents sit in a shared/ folder beside the checkout or one level up.
SEEDS = next(
    (p / "shared" / "seeds" for p in (_ROOT.parent, _ROOT.parent.parent)
     if (p / "shared" / "seeds").is_dir()),
    _ROOT / "missing",
)  # fmt: skip


def _characters() -> list[str]:
    """The Chinese characters of the seeds (or of the set's facts), as often as they occur."""
    import re

    texts = [p.read_text() for p in sorted(SEEDS.glob("*.txt"))] if SEEDS.is_dir() else []
    if not texts:
        zh = json.loads((DATA / "search_zh_partial.json").read_text())["facts"]
        texts = [f["text"] for f in zh]
    return re.findall(r"[\u4e00-\u9fff]", "".join(texts))


def _chinese_filler(conn: psycopg.Connection[Any], n: int) -> None:
    """n facts of 24 characters drawn at random with the seeds' character frequencies: text
    with the seeds' common characters and pairs, which rarely repeats a pair the set asks for."""
    rng = random.Random(5)
    chars = _characters()
    with conn.cursor() as cur, cur.copy("COPY ember.facts (text, evidence_kind) FROM STDIN") as cp:
        for _ in range(n):
            cp.write_row(("".join(rng.choices(chars, k=24)) + "\u3002", "user-stated"))
    conn.execute("VACUUM ANALYZE ember.facts")


TRGM_SQL = """
SELECT f.id FROM ember.facts AS f WHERE f.text LIKE '%%' || %s || '%%'
ORDER BY similarity(f.text, %s) DESC, f.id LIMIT 5
"""
ENGLISH_SQL = """
SELECT f.id FROM ember.facts AS f, plainto_tsquery('english', %s) AS q
WHERE to_tsvector('english', f.text) @@ q
ORDER BY ts_rank_cd(to_tsvector('english', f.text), q) DESC, f.id LIMIT 5
"""


def recall() -> dict[str, Any]:
    zh = json.loads((DATA / "search_zh_partial.json").read_text())["facts"]
    qa = json.loads((DATA / "search_questions.json").read_text())["facts"]
    partial = [(q, f["text"]) for f in zh for q in f["queries"]]
    questions = [(q, f["text"]) for f in qa for q in f["questions"]]
    out: dict[str, Any] = {"zh_facts": len(zh), "qa_facts": len(qa)}
    with (
        scratch_database("ember_bench_b9_recall") as url,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        ids = _load_facts(conn, list(dict.fromkeys(f["text"] for f in zh + qa)))
        ember_sql = "SELECT fact_id FROM ember.search_memory('default', 'human', %s, NULL, 5)"
        out["zh_ember"] = _recall(conn, ids, partial, ember_sql)
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        conn.execute("CREATE INDEX facts_trgm ON ember.facts USING gin (text gin_trgm_ops)")
        out["zh_trgm"] = _recall(conn, ids, partial, TRGM_SQL, embed=lambda q: q)
        out["zh_english"] = _recall(conn, ids, partial, ENGLISH_SQL)
        out["qa_off"] = _recall(conn, ids, questions, ember_sql)
        out["qa_off_en"] = _recall(conn, ids, [c for c in questions if c[0].isascii()], ember_sql)
        out["qa_off_zh"] = _recall(
            conn, ids, [c for c in questions if not c[0].isascii()], ember_sql
        )
        try:
            from ember.embed import load_embedder
            from ember.worker.steward import vector_literal

            embedder = load_embedder()
            texts = list(ids)
            for text, vector in zip(texts, embedder.embed(texts), strict=True):
                conn.execute(
                    "SELECT ember.set_fact_embedding(%s, %s::vector)",
                    (ids[text], vector_literal(vector)),
                )
            conn.execute("VACUUM ANALYZE ember.facts")  # as autovacuum leaves it after the updates
            with_vector = "SELECT fact_id FROM ember.search_memory('default', 'human', %s, %s::vector, 5)"

            def embed(q: str) -> str:
                return vector_literal(embedder.embed([q])[0])

            out["qa_on"] = _recall(conn, ids, questions, with_vector, embed)
            out["qa_on_en"] = _recall(
                conn, ids, [c for c in questions if c[0].isascii()], with_vector, embed
            )
            out["qa_on_zh"] = _recall(
                conn, ids, [c for c in questions if not c[0].isascii()], with_vector, embed
            )
        except Exception as exc:  # the embedder is optional
            out["embedder_error"] = f"{type(exc).__name__}: {exc}"
        # Speed with the set hidden among 20,000 more Chinese facts made of the seeds' clauses.
        _chinese_filler(conn, 20_000)
        out["zh_ember_20k"] = _recall(conn, ids, partial, ember_sql)
        out["zh_trgm_20k"] = _recall(conn, ids, partial, TRGM_SQL, embed=lambda q: q)
    return out


def _pct(figure: tuple[int, int, float]) -> str:
    return f"{figure[0]}/{figure[1]} ({100 * figure[0] / figure[1]:.0f}%)"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-mcp", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    rec = recall()
    print(f"B9 recall: {json.dumps({k: v for k, v in rec.items()}, default=str)}", flush=True)
    lat = (
        {"sizes": [], "mcp": {}}
        if args.skip_latency
        else latency(sizes, args.searches, mcp_at=0 if args.skip_mcp else 10_000)
    )

    zh_ok = rec["zh_ember"][0] / rec["zh_ember"][1] >= 0.9
    qa_off = rec["qa_off"][0] / rec["qa_off"][1]
    lines = [
        "## B9: search_memory against bare PostgreSQL, recall in Chinese and on questions, MCP",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {machine()}.",
        "",
        "### Recall (top 5)",
        "",
        f"Chinese partial words: {rec['zh_facts']} facts from the seeds' sentences, "
        f"{rec['zh_ember'][1]} queries of 2-4 characters (`bench/data/search_zh_partial.json`), "
        "no embedder. The alternatives run over the same facts in the same database.",
        "",
        "| terms | answered in the top 5 | median per query | target |",
        "|---|---|---|---|",
        f"| Ember: english words + CJK characters and pairs (GIN) | {_pct(rec['zh_ember'])} "
        f"| {rec['zh_ember'][2]:.2f} ms | >= 90%: {'meets' if zh_ok else 'MISSES'} |",
        f"| pg_trgm: `LIKE '%query%'` on a trigram GIN index, by similarity "
        f"| {_pct(rec['zh_trgm'])} | {rec['zh_trgm'][2]:.2f} ms | |",
        f"| english configuration alone (before 0033) | {_pct(rec['zh_english'])} "
        f"| {rec['zh_english'][2]:.2f} ms | |",
        f"| Ember, the set among 20,000 random Chinese facts | {_pct(rec['zh_ember_20k'])} "
        f"| {rec['zh_ember_20k'][2]:.2f} ms | |",
        f"| pg_trgm, the same | {_pct(rec['zh_trgm_20k'])} | {rec['zh_trgm_20k'][2]:.2f} ms | |",
        "",
        "pg_trgm extracts no trigram from a two-character pattern, so `LIKE '%周报%'` cannot use "
        "its index and reads every fact; the character pairs are an index lookup at any size.",
        "",
        f"Questions: {rec['qa_facts']} facts and {rec['qa_off'][1]} natural-language questions "
        "about them, English and Chinese (`bench/data/search_questions.json`), all facts of both "
        "sets in one database.",
        "",
        "| embedder | all | English | Chinese | target |",
        "|---|---|---|---|---|",
        f"| off (text alone) | {_pct(rec['qa_off'])} | {_pct(rec['qa_off_en'])} "
        f"| {_pct(rec['qa_off_zh'])} | >= 80%: {'meets' if qa_off >= 0.8 else 'MISSES'} |",
    ]
    if "qa_on" in rec:
        qa_on = rec["qa_on"][0] / rec["qa_on"][1]
        lines.append(
            f"| on (all-MiniLM-L6-v2, fused) | {_pct(rec['qa_on'])} | {_pct(rec['qa_on_en'])} "
            f"| {_pct(rec['qa_on_zh'])} | higher than off: "
            f"{'meets' if qa_on > qa_off else 'MISSES'} |"
        )
    else:
        lines.append(f"| on | not measured: {rec.get('embedder_error')} | | | |")
    if lat["sizes"]:
        lines += [
            "",
            "### Latency against the bare statement",
            "",
            f"{args.searches} searches per size, three words plus a vector, by an untagged viewer; "
            "the bare statement is HNSW top 40 plus a GIN match of every word limited to 40, with "
            "no labels, ranking or fusion. Both alternate in one connection.",
            "",
            "| facts | Ember p50 | Ember p95 | bare p50 | bare p95 | p50 ratio | p95 ratio "
            "| load avg | target |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in lat["sizes"]:
            ratio50 = r["ember"][0] / r["bare"][0]
            ratio95 = r["ember"][1] / r["bare"][1]
            target = ""
            if r["size"] == max(s["size"] for s in lat["sizes"]):
                target = (
                    f"p95 ratio <= 1.5: {verdict(ratio95, 1.5)}; "
                    f"p95 <= 10 ms: {verdict(r['ember'][1], 10)}"
                )
            lines.append(
                f"| {r['size']:,} | {r['ember'][0]:.2f} ms | {r['ember'][1]:.2f} ms "
                f"| {r['bare'][0]:.2f} ms | {r['bare'][1]:.2f} ms | {ratio50:.2f} | {ratio95:.2f} "
                f"| {r['load'][0]:.1f} / {r['load'][1]:.1f} | {target} |"
            )
        lines += [
            "",
            "Load average: the machine's one-minute load before and after each size's searches "
            "(2 cores, shared with other work).",
        ]
    if lat["mcp"]:
        m = lat["mcp"]
        r50, r95 = m["mcp"][0] / m["direct"][0], m["mcp"][1] / m["direct"][1]
        lines += [
            "",
            "### MCP over stdio at 10,000 facts",
            "",
            "| | p50 | p95 |",
            "|---|---|---|",
            f"| `ember.search_memory` called directly (text) | {m['direct'][0]:.2f} ms "
            f"| {m['direct'][1]:.2f} ms |",
            f"| `search_memory` tool of `ember mcp`, stdio | {m['mcp'][0]:.2f} ms "
            f"| {m['mcp'][1]:.2f} ms |",
            f"| ratio | {r50:.2f} | {r95:.2f} |",
            "",
            f"Target: an MCP call <= 2x the SQL function: {verdict(r50, 2.0)} at the median, "
            f"{verdict(r95, 2.0)} at p95.",
        ]
    print("\n".join(lines))
    write_section("b9", "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
