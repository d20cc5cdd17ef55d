"""Helpers shared by Ember's benchmark scripts (bench/bN_*.py).

Each benchmark is a standalone script: it takes the server from `ember.config.database_url()`,
creates its own scratch database (dropped when it finishes), prints its figures as lines of
text, and writes a Markdown section to bench/out/bN.md, which `make bench` (bench/run.py)
gathers into docs/benchmarks.md. Figures are ratios measured in one run: the machines these
run on are shared and noisy, so an absolute time means little and a ratio of two times taken
side by side means more.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from ember.config import database_url
from ember.devsetup import drop_database, fresh_database
from ember.embedded import project_root

OUT = Path(__file__).resolve().parent / "out"


@contextmanager
def scratch_database(name: str) -> Iterator[str]:
    """A freshly migrated database on Ember's server, dropped afterwards."""
    base = database_url()
    url, _ = fresh_database(base, name, root=project_root(), pgtap=False)
    try:
        yield url
    finally:
        drop_database(base, name)


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of fn takes, by the monotonic clock."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    return statistics.median(timed(fn) for _ in range(repeat)) * 1000


def verdict(value: float, target: float, *, lower_is_better: bool = True) -> str:
    ok = value <= target if lower_is_better else value >= target
    return "meets" if ok else "MISSES"


def write_section(number: str, markdown: str) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{number}.md"
    path.write_text(markdown.rstrip() + "\n")
    return path


def explain(conn: psycopg.Connection, statement: str, params: tuple[object, ...] = ()) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) text of one statement (run for real: wrap in a rollback)."""
    rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + statement, params).fetchall()
    return "\n".join(r[0] for r in rows)


def function_query(conn: psycopg.Connection, signature: str) -> str:
    """The query of a plpgsql function's last RETURN QUERY (the general case, after any early
    returns for a narrower call), to EXPLAIN what the function runs."""
    body = conn.execute("SELECT pg_get_functiondef(%s::regprocedure)", (signature,)).fetchone()
    assert body is not None
    text = str(body[0])
    start = text.rindex("RETURN QUERY") + len("RETURN QUERY")
    end = text.index(";\nEND;", start)
    return text[start:end]
