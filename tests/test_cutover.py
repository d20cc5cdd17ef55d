"""Cut-over end to end: the real worker pipelines against `ember sim`, the real database.

A thread is cut over to shadow, shadow's proposals about its new rows become facts, and the
cut-over is rolled back: the steward then reads the thread again from the cut-over point and
memory ends exactly as if the steward alone had read everything. The SQL rules themselves are
in pgtap/097_cutover.sql and pgtap/097_cutover_schedule.sql.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from ember.commands.base import CliError
from ember.commands.cutover import parse_scope
from ember.config import with_database
from ember.devsetup import drop_database
from ember.sim import SimServer
from ember.sim.steward import StewardStandIn
from ember.worker.shadow import ShadowPipeline
from ember.worker.steward import StewardPipeline
from workerkit import EMBER, InProcessContext, host_on


@pytest.fixture(name="sim")
def _sim() -> Iterator[SimServer]:
    with SimServer(responder=StewardStandIn()) as server:
        yield server


def _query(url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()  # type: ignore[arg-type]


def _setup(url: str) -> None:
    with host_on(url) as host:
        host.create_thread("main", "main")
        host.conn.execute("SELECT ember.set_thread_model('default', 'main', 'claude-haiku-4-5')")
        host.conn.execute("SELECT ember.ensure_steward_thread('default')")
        host.conn.execute("SELECT ember.shadow_activate()")
        host.conn.execute(
            "UPDATE ember.settings SET value = '\"0 seconds\"' WHERE key = 'idle_before_digest'"
        )
        host.create_thread("trip", "side")
        host.create_thread("ops", "side")


# Each row is one fact for the simulator's rule-based reader (a preference, a decision, an
# instruction), so both pipelines find the same facts in them.
FIRST = [
    ("trip", "I prefer tea over coffee."),
    ("ops", "We decided to deploy on Tuesdays."),
]
SECOND = [
    ("trip", "I prefer window seats on trains."),
    ("trip", "From now on book hotels near the station."),
    ("ops", "I always want the release notes in English."),
]


def _append(url: str, rows: list[tuple[str, str]]) -> None:
    with host_on(url) as host:
        for thread, text in rows:
            host.append_message(thread, "user", text, author="human")
        for thread in {t for t, _ in rows}:
            host.task_ended(thread)


async def _drain(url: str, base_url: str, *, shadow: bool) -> int:
    """Run the pipeline's jobs one after another until none is left; how many ran."""
    pipeline: Any = ShadowPipeline() if shadow else StewardPipeline()
    ctx = InProcessContext(url, base_url)
    done = 0
    while True:
        async with ctx.connection() as conn:
            job = await pipeline.claim(conn, "test", timedelta(minutes=5))
        if job is None:
            return done
        await pipeline.execute(job, ctx)
        done += 1


def _memory(url: str) -> set[tuple[str, str, tuple[str, ...]]]:
    """Active facts as (text, kind, the cited rows' contents): comparable across databases."""
    rows = _query(
        url,
        "SELECT f.text, f.evidence_kind, array_agg(m.content ORDER BY m.content)"
        " FROM ember.facts AS f JOIN ember.fact_evidence AS e ON e.fact_id = f.id"
        " JOIN ember.messages AS m ON m.id = e.message_id"
        " WHERE f.status = 'active' GROUP BY f.tenant_id, f.id",
    )
    return {(t, k, tuple(c)) for t, k, c in rows}


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EMBER, "cutover", *args],
        env={**os.environ, "DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_rollback_restores_the_steward_s_facts_exactly(
    db: str, template_db: str, server_url: str, sim: SimServer
) -> None:
    # The baseline: the steward alone reads everything.
    alone = db
    _setup(alone)
    _append(alone, FIRST)
    asyncio.run(_drain(alone, sim.base_url, shadow=False))
    _append(alone, SECOND)
    asyncio.run(_drain(alone, sim.base_url, shadow=False))
    expected = _memory(alone)
    assert len(expected) == len(FIRST) + len(SECOND)

    # The same conversation in a second database, with trip cut over in between.
    name = f"ember_cut_{os.getpid()}"
    drop_database(server_url, name)
    with psycopg.connect(with_database(server_url, "postgres"), autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_db)
            )
        )
    cut = with_database(server_url, name)
    try:
        _setup(cut)
        _append(cut, FIRST)
        asyncio.run(_drain(cut, sim.base_url, shadow=False))
        steward_before = _query(
            cut,
            "SELECT id, status, updated_at FROM ember.facts WHERE cutover_id IS NULL ORDER BY id",
        )

        dry = _cli(cut, "--scope", "thread:trip", "--dry-run", "--json")
        assert dry.returncode == 0, dry.stderr
        plan = json.loads(dry.stdout)
        assert plan["threads"] == ["trip"] and plan["refused"] is None
        assert _query(cut, "SELECT count(*) FROM ember.cutovers")[0][0] == 0
        made = _cli(cut, "--scope", "thread:trip", "--by", "ops-team", "--note", "trial")
        assert made.returncode == 0, made.stderr
        assert (
            "cut-over of thread:trip" in made.stdout and "comparison for the scope" in made.stdout
        )
        again = _cli(cut, "--scope", "all")
        assert again.returncode == 9 and "EM122" in again.stderr

        _append(cut, SECOND)
        asyncio.run(_drain(cut, sim.base_url, shadow=True))
        asyncio.run(_drain(cut, sim.base_url, shadow=False))
        promoted = _query(
            cut,
            "SELECT f.text FROM ember.facts AS f"
            " WHERE f.cutover_id IS NOT NULL AND f.status = 'active'",
        )
        assert promoted, "shadow's proposals about trip's new rows became facts"
        # While cut over, the steward read ops's new row but none of trip's.
        undigested = {
            r[0]
            for r in _query(
                cut,
                "SELECT content FROM ember.messages WHERE thread_id IN ('trip', 'ops')"
                " AND episode_id IS NULL",
            )
        }
        assert undigested == {t for th, t in SECOND if th == "trip"}

        back = _cli(cut, "--scope", "thread:trip", "--rollback", "--json")
        assert back.returncode == 0, back.stderr
        rolled = json.loads(back.stdout)
        assert len(rolled["retired_facts"]) == len(promoted) and rolled["kept_facts"] == []
        asyncio.run(_drain(cut, sim.base_url, shadow=False))

        assert _memory(cut) == expected
        # The steward's facts from before the cut-over were never touched.
        assert (
            _query(
                cut,
                "SELECT id, status, updated_at FROM ember.facts WHERE cutover_id IS NULL"
                " AND id = ANY(%s) ORDER BY id",
                [r[0] for r in steward_before],
            )
            == steward_before
        )
        # Every promoted fact is retired, with its cut-over in its history.
        history = _query(
            cut,
            "SELECT f.status, h.cutover_id IS NOT NULL FROM ember.facts AS f"
            " JOIN ember.fact_history AS h ON h.fact_id = f.id AND h.change = 'retired'"
            " WHERE f.cutover_id IS NOT NULL",
        )
        assert history and all(s == "retired" and named for s, named in history)
        (undigested_left,) = _query(
            cut,
            "SELECT count(*) FROM ember.messages WHERE thread_id IN ('trip', 'ops')"
            " AND episode_id IS NULL",
        )[0]
        assert undigested_left == 0
    finally:
        drop_database(server_url, name)


@pytest.mark.parametrize("text", ["thread", "thread:", "room:x", "category", "al"])
def test_a_malformed_scope_is_a_usage_error(text: str) -> None:
    with pytest.raises(CliError) as caught:
        parse_scope(text)
    assert caught.value.code == 2


def test_scopes_parse() -> None:
    assert parse_scope("all") == ("all", None)
    assert parse_scope("thread:trip") == ("thread", "trip")
    assert parse_scope("category:health") == ("category", "health")


def test_the_rollback_text_says_what_goes_back_and_what_stays() -> None:
    from ember.commands.cutover import describe

    text = describe(
        {
            "action": "rollback",
            "scope": "thread",
            "value": "trip",
            "cutover_id": 3,
            "from_seq": 41,
            "threads": ["trip"],
            "rows_after_point": 5,
            "facts_to_retire": [7, 9],
            "facts_to_keep": [8],
            "promotions": {"promoted": 3, "already_stated": 0, "refused": 1},
            "comparison": {"facts": 4, "proposals": 6, "rejected_proposals": 1},
        },
        dry_run=True,
    )
    assert "rollback of thread:trip (cut-over 3)" in text
    assert "read again from seq 41: 5 rows" in text
    assert "2 would be retired [7, 9], 1 kept (the steward confirmed them) [8]" in text
    assert "3 promoted, 0 already stated, 1 refused" in text
    assert text.endswith("dry run: nothing was changed")
