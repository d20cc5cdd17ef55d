"""Forgetting after a real steward wake: the steward (ember.sim.steward's stand-in, over the real
SDK and HTTP) reads a row, writes a fact quoting it through steward_step, and its record keeps the
page, the write_fact call and its result. Forgetting the row must leave none of its text anywhere,
and the fact's history must name the wake that wrote it."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import psycopg

from ember.sim import SimServer
from ember.sim.steward import StewardStandIn
from ember.worker.steward import StewardPipeline
from forgetkit import marker_hits
from workerkit import InProcessContext, host_on

MARKER = "zebrawood4471"


async def _wake(url: str, base_url: str) -> int:
    pipeline = StewardPipeline()
    ctx = InProcessContext(url, base_url)
    async with ctx.connection() as conn:
        job = await pipeline.claim(conn, "test", timedelta(minutes=5))
    assert job is not None
    await pipeline.execute(job, ctx)
    return int(job.run_id)


def test_forgetting_a_row_the_steward_digested_leaves_nothing_of_it(db: str) -> None:
    with host_on(db) as host:
        host.create_thread("main", "main")
        host.conn.execute("SELECT ember.set_thread_model('default', 'main', 'claude-haiku-4-5')")
        host.conn.execute("SELECT ember.ensure_steward_thread('default')")
        host.conn.execute(
            "UPDATE ember.settings SET value = '\"0 seconds\"' WHERE key = 'idle_before_digest'"
        )
        host.create_thread("home", "side")
        secret = host.append_message(
            "home", "user", f"I prefer {MARKER} furniture over oak.", author="human"
        )
        host.append_message("home", "user", "I prefer tea over coffee.", author="human")

    with SimServer(responder=StewardStandIn()) as sim:
        run = asyncio.run(_wake(db, sim.base_url))

    with psycopg.connect(db, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT f.id, f.text, h.run_id FROM ember.facts AS f"
            " JOIN ember.fact_history AS h ON h.fact_id = f.id AND h.change = 'written'"
            " ORDER BY f.id"
        ).fetchall()
        pinned = [(f, r) for f, text, r in rows if MARKER in text]
        assert len(pinned) == 1, f"the wake should have written a fact quoting the row: {rows}"
        fact, written_by = pinned[0]
        assert written_by == run, "the history names the wake that wrote the fact"
        before = marker_hits(conn, MARKER)
        assert {"messages.content", "facts.text"} <= before.keys()

        row = conn.execute(
            "SELECT ember.forget_messages('default', ARRAY[%s]::bigint[], 'the user asked')",
            (secret,),
        ).fetchone()
        assert row is not None
        result = row[0]
        assert result["facts_retired"] == [fact]
        assert result["steward_rows_redacted"], "the wake's page and write_fact call are redacted"

        assert marker_hits(conn, MARKER) == {}
        # The other fact of the same wake, and its page line, are kept.
        kept = conn.execute(
            "SELECT count(*) FROM ember.facts"
            " WHERE status = 'active' AND text LIKE '%tea over coffee%'"
        ).fetchone()
        assert kept == (1,)
        page = conn.execute(
            "SELECT count(*) FROM ember.messages WHERE thread_id = 'memory-steward'"
            " AND content LIKE %s AND content LIKE '%%tea over coffee%%'",
            (f"%m:{secret} [forgotten]%",),
        ).fetchone()
        assert page == (1,), "the page keeps its other rows and tombstones the forgotten one"
        explained = conn.execute("SELECT ember.explain_fact(%s)", (fact,)).fetchone()
        assert explained is not None
        doc = explained[0]
        assert doc["fact"]["text"] is None and doc["fact"]["retired_reason"] == "source-forgotten"
        assert doc["run"]["id"] == run and doc["run"]["model"] == "claude-haiku-4-5"
