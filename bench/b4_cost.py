"""B4: what shadow memory costs, on a generated corpus, at list price.

A corpus of threads (default 200) is recorded through a host that calls `ember sim` with the real
SDK and the capture hook, so every thread has a real prefix. The same corpus is then digested
twice, by `ember worker` against the simulator: once on the hot path (each thread's prefix
replayed while its cache is warm) and once on the cold path (the prefixes dropped, rendered pages
to the light model). Prices come from the run's snapshot (view ember.shadow_run_cost).

Figures: list-price USD per 1,000 digested messages for hot and for cold, and the hot path's
cache-read share of the old-prefix tokens (target >= 0.95).

    .venv/bin/python bench/b4_cost.py [--threads 200]
"""

from __future__ import annotations

import argparse
import random
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import anthropic
import psycopg
from _worker_common import (
    drop_scratch,
    machine,
    scratch_database,
    start_worker,
    stop_worker,
    wait_count,
    write_section,
)
from psycopg import sql

from ember.config import database_url, with_database
from ember.host import Host, PrefixCapture, turn_tools
from ember.sim import SimServer

HOT_DB = "ember_bench_b4"
COLD_DB = "ember_bench_b4_cold"
MODEL = "claude-sonnet-4-6"
# Long enough for Sonnet 4.6's observed minimum cacheable length (2,048 tokens): a shorter
# prefix is not cached by the API, so it is not hot-eligible (docs/models.md).
SYSTEM = (
    "You are the assistant of a small engineering team: planning, travel, deploys and reviews. "
    "Answer briefly, ask before anything irreversible, and use the tools you are given. "
) * 50
TOOLS = turn_tools(
    [
        {
            "name": "run",
            "description": "run a shell command",
            "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        }
    ]
)
SAYINGS = [
    "I prefer {x} over the alternatives.",
    "From now on always use {x} for this.",
    "We decided to go with {x}.",
    "Can you check whether {x} is available?",
    "Remember that {x} is what the team uses.",
    "What do you think about {x}?",
]
THINGS = [
    "Postgres",
    "window seats",
    "metric units",
    "short answers",
    "the 9:05 train",
    "tabs",
    "ruff",
    "Lisbon",
    "dark mode",
    "green tea",
    "weekly releases",
    "pytest",
]
REPLIES = [
    "Understood, I will keep that in mind for the rest of this work.",
    "I checked: it is available and I noted it in the plan for the week.",
    "Done. The change is in and the checks passed on the first try.",
    "Here is a short summary of the options with their costs and risks.",
]


def conversation(rng: random.Random) -> list[tuple[str, str]]:
    turns = rng.randint(2, 12)
    out: list[tuple[str, str]] = []
    for _ in range(turns):
        said = (
            rng.choice(SAYINGS).format(x=rng.choice(THINGS))
            + " "
            + "Some context. " * rng.randint(2, 30)
        )
        out.append(("user", said))
        out.append(
            ("assistant", rng.choice(REPLIES) + " " + "Details follow. " * rng.randint(2, 40))
        )
    out.pop()  # the last assistant answer comes from the recorded call
    return out


def record_corpus(url: str, sim: SimServer, threads: int) -> dict[str, int]:
    """Every thread's rows and its last real call; returns each thread's old-prefix tokens."""
    rng = random.Random(7)
    capture = PrefixCapture()
    client = anthropic.Anthropic(
        base_url=sim.base_url, api_key="bench", max_retries=0, http_client=capture.http_client()
    )
    old_prefix: dict[str, int] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        host = Host(conn)
        host.create_thread("main", "main")
        conn.execute("SELECT ember.shadow_activate()")
        for i in range(threads):
            t = f"t{i:03d}"
            host.create_thread(t, "side")
            turns = conversation(rng)
            messages: list[dict[str, Any]] = []
            for role, text in turns:
                host.append_message(t, role, text, author="human" if role == "user" else None)
                messages.append({"role": role, "content": [{"type": "text", "text": text}]})
            messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
            answer = client.messages.create(
                model=MODEL,
                max_tokens=1024,
                system=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
                tools=TOOLS,  # type: ignore[arg-type]
                messages=messages,  # type: ignore[arg-type]
                extra_headers={"x-ember-sim-responder": "echo"},
            )
            host.append_message(
                t, "assistant", "".join(b.text for b in answer.content if b.type == "text")
            )
            host.note_prefix(t, capture.take())
            u = answer.usage
            old_prefix[t] = (
                u.input_tokens
                + (u.cache_read_input_tokens or 0)
                + (u.cache_creation_input_tokens or 0)
            )
    return old_prefix


def digest(url: str, sim: SimServer, threads: int, signal_sql: str) -> None:
    proc = start_worker(url, sim.base_url, "--concurrency", "8", "--poll-interval", "5")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            for (t,) in conn.execute("SELECT id FROM ember.threads WHERE kind = 'side'").fetchall():
                conn.execute(signal_sql, (t,))
        wait_count(url, "SELECT count(*) FROM ember.shadow_runs WHERE status <> 'running'", threads)
    finally:
        stop_worker(proc)


def figures(url: str, path: str) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 'completed'), sum(cost_usd),"
            " sum(messages_read), sum(cache_read_tokens), sum(input_tokens), sum(output_tokens),"
            " sum(cache_write_5m_tokens + cache_write_1h_tokens)"
            " FROM ember.shadow_run_cost WHERE path = %s",
            (path,),
        ).fetchone()
        props = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE validation_error IS NULL)"
            " FROM ember.shadow_proposals"
        ).fetchone()
        per_thread = dict(
            conn.execute(
                "SELECT thread_id, cache_read_tokens FROM ember.shadow_runs WHERE path = %s",
                (path,),
            ).fetchall()
        )
    assert row is not None and props is not None
    runs, completed, cost, messages, read, uncached, output, written = row
    return {
        "runs": runs,
        "completed": completed,
        "cost": Decimal(cost or 0),
        "messages": int(messages or 0),
        "read": int(read or 0),
        "uncached": int(uncached or 0),
        "output": int(output or 0),
        "written": int(written or 0),
        "proposals": props[0],
        "valid": props[1],
        "per_thread_read": per_thread,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=200)
    args = parser.parse_args()

    hot_url = scratch_database(HOT_DB)
    cold_url = with_database(database_url(), COLD_DB)
    try:
        with SimServer(responder="heuristic") as sim:
            old_prefix = record_corpus(hot_url, sim, args.threads)
            # The same corpus for the cold path: a copy taken before anything is digested.
            with psycopg.connect(
                with_database(database_url(), "postgres"), autocommit=True
            ) as conn:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                        sql.Identifier(COLD_DB)
                    )
                )
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        sql.Identifier(COLD_DB), sql.Identifier(HOT_DB)
                    )
                )
            with psycopg.connect(cold_url, autocommit=True) as conn:
                conn.execute("DELETE FROM ember.shadow_prefixes")

            digest(hot_url, sim, args.threads, "SELECT ember.waiting_for_user(%s)")
            hot = figures(hot_url, "hot")
            digest(cold_url, sim, args.threads, "SELECT ember.task_ended(%s)")
            cold = figures(cold_url, "cold")
    finally:
        drop_scratch(COLD_DB)
        drop_scratch(HOT_DB)

    share = hot["read"] / sum(old_prefix[t] for t in hot["per_thread_read"]) if hot["runs"] else 0.0
    rows = []
    for name, f in (("hot", hot), ("cold", cold)):
        per_k = f["cost"] / f["messages"] * 1000 if f["messages"] else Decimal("NaN")
        f["per_k"] = per_k
        print(
            f"B4 shadow {name}: {f['completed']}/{f['runs']} runs completed, "
            f"{f['messages']} messages digested, "
            f"${f['cost']:.4f} in all, ${per_k:.4f} per 1,000 digested messages"
        )
        rows.append(
            f"| {name} | {f['completed']}/{f['runs']} | {f['messages']} | {f['read']:,} "
            f"| {f['written']:,} | "
            f"{f['uncached']:,} | {f['output']:,} | ${f['cost']:.4f} | ${per_k:.4f} |"
        )
    print(f"B4 hot path cache-read share of old-prefix tokens: {share:.3f} (target >= 0.95)")
    lines = [
        "## B4: shadow cost at list price (generated corpus, ember sim)",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {machine()}; "
        f"{args.threads} threads of 3 to 23 messages, recorded through the SDK with the capture "
        f"hook; hot on {MODEL}, cold on the light tier. Token counts are the simulator's "
        "estimate (one token per four characters), prices the registry's "
        "snapshot: an estimate, not a bill.",
        "",
        "| path | runs completed | messages digested | cache read | cache written "
        "| uncached input | output | USD | USD per 1,000 messages |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"- hot path cache-read share of old-prefix tokens: {share:.3f} "
        f"(target >= 0.95: {'meets' if share >= 0.95 else 'misses'})",
        "",
    ]
    path = write_section("b4", "\n".join(lines))
    print(f"B4 written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
