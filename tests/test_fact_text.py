"""Facts and proposals hold the text the person meant, through a real cold run and steward wakes.

The pages a model reads show a line break as the two characters \\n, U+2028 as \\u2028 (one row
per line, functions/035_render.sql); the heuristic responder and the steward stand-in copy the
text they read, as a real model does. What is stored must be clean (functions/054_fact_text.sql),
and a second wake over the same statement must find it in memory and not write it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from ember.sim import SimServer
from ember.sim.steward import StewardStandIn
from ember.worker.shadow import ShadowPipeline
from ember.worker.steward import StewardPipeline
from workerkit import InProcessContext, host_on, offer_cold, prepare

CONTENT = "I prefer tea in the morning.\nI prefer\ttrains to planes,\u2028and aisle seats."
ESCAPES = ("\\n", "\\r", "\\u", "\\\\", "\n", "\t", "\u2028")


@pytest.fixture(name="steward_sim")
def _steward_sim() -> Iterator[SimServer]:
    # The stand-in answers the steward's requests and hands shadow requests to the heuristic.
    with SimServer(responder=StewardStandIn()) as server:
        yield server


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a parsed JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _texts(url: str, sql: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [str(r[0]) for r in conn.execute(sql)]  # type: ignore[arg-type]


def _cold_run(url: str, base_url: str) -> None:
    async def go() -> None:
        pipeline = ShadowPipeline()
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            job = await pipeline.claim(conn, "test", timedelta(minutes=5))
        assert job is not None and job.plan["path"] == "cold"
        ctx = InProcessContext(url, base_url)
        await pipeline.execute(job, ctx)
        await ctx.client.close()

    asyncio.run(go())


def _wake(url: str, base_url: str) -> None:
    async def go() -> None:
        pipeline = StewardPipeline()
        ctx = InProcessContext(url, base_url)
        async with ctx.connection() as conn:
            job = await pipeline.claim(conn, "test", timedelta(minutes=5))
        assert job is not None
        await pipeline.execute(job, ctx)
        await ctx.client.close()

    asyncio.run(go())


def test_content_with_line_breaks_becomes_clean_facts_and_proposals_written_once(
    db: str, steward_sim: SimServer
) -> None:
    prepare(db, ["travel"])
    with host_on(db) as host:
        host.conn.execute("SELECT ember.set_thread_model('default', 'main', 'claude-haiku-4-5')")
        host.conn.execute("SELECT ember.ensure_steward_thread('default')")
        host.conn.execute(
            "UPDATE ember.settings SET value = '\"0 seconds\"' WHERE key = 'idle_before_digest'"
        )
    offer_cold(db, "travel", CONTENT)

    _cold_run(db, steward_sim.base_url)
    proposals = _texts(db, "SELECT text FROM ember.shadow_proposals ORDER BY id")
    assert proposals, "the cold reader proposed facts from the row"
    # The page showed the escapes, and the proposals were copied from it.
    shown = "\n".join(_strings([r.body for r in steward_sim.requests]))
    assert "\\n" in shown and "\\u2028" in shown
    for text in proposals:
        assert not any(e in text for e in ESCAPES), text

    _wake(db, steward_sim.base_url)
    facts = _texts(db, "SELECT text FROM ember.facts ORDER BY id")
    assert any("tea in the morning" in t for t in facts)
    assert any("trains to planes, and aisle seats" in t for t in facts), facts
    for text in facts:
        assert not any(e in text for e in ESCAPES), text

    # The same words again in another row: the next wake finds them in memory.
    with host_on(db) as host:
        host.append_message("travel", "user", CONTENT, author="human")
    _wake(db, steward_sim.base_url)
    again = _texts(db, "SELECT text FROM ember.facts ORDER BY id")
    assert again == facts, "no fact was written twice"
    found = _texts(
        db,
        "SELECT content FROM ember.messages WHERE thread_id = 'memory-steward'"
        " AND tool_name = 'search_memory' ORDER BY seq DESC LIMIT 1",
    )
    assert found and "tea in the morning" in found[0], "the search found the stored fact"
