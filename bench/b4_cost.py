"""B4: what shadow memory costs, on a generated corpus, at list price.

A corpus of threads (default 200) is recorded through a host that calls `ember sim` with the real
SDK and the capture hook, so every thread has a real prefix. The same corpus is then digested
twice, by `ember worker` against the simulator: once on the hot path (each thread's prefix
replayed while its cache is warm) and once on the cold path (the prefixes dropped, rendered pages
to the light model). Prices come from the run's snapshot (view ember.shadow_run_cost).

Two sizes in one run: the generated conversations as they are (prefixes of about 3k tokens) and
the same with every message's context twenty times longer (about 30k tokens, a long agent
session, the hot path's case). Figures per size and path: list-price USD per 1,000 digested
messages, the uncached share of the input, the hot path's cache-read share of the old-prefix
tokens (target >= 0.95), the evidence-validity rate of the proposals (pointers of valid proposals
/ all pointers) and the share of digested rows a valid proposal cites.

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


# The sizes: how many times longer each message's context is than the base corpus's.
SIZES = {"3k": 1, "30k": 20}


def conversation(rng: random.Random, scale: int = 1) -> list[tuple[str, str]]:
    turns = rng.randint(2, 12)
    out: list[tuple[str, str]] = []
    for _ in range(turns):
        said = (
            rng.choice(SAYINGS).format(x=rng.choice(THINGS))
            + " "
            + "Some context. " * (rng.randint(2, 30) * scale)
        )
        out.append(("user", said))
        out.append(
            (
                "assistant",
                rng.choice(REPLIES) + " " + "Details follow. " * (rng.randint(2, 40) * scale),
            )
        )
    out.pop()  # the last assistant answer comes from the recorded call
    return out


def record_corpus(url: str, sim: SimServer, threads: int, scale: int = 1) -> dict[str, int]:
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
            turns = conversation(rng, scale)
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
        # Pointers of valid proposals over all pointers, and the digested rows a valid one cites.
        pointers = conn.execute(
            "SELECT count(*) FILTER (WHERE p.validation_error IS NULL), count(*),"
            " count(DISTINCT e.value ->> 'message_id') FILTER (WHERE p.validation_error IS NULL)"
            " FROM ember.shadow_proposals AS p"
            " CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(p.evidence) = 'array'"
            " THEN p.evidence ELSE '[]' END) AS e"
        ).fetchone()
        # The path's input price, to tell what its uncached input cost from the rest.
        price = conn.execute(
            "SELECT max(price_input) FROM ember.shadow_runs WHERE path = %s", (path,)
        ).fetchone()
        per_thread = dict(
            conn.execute(
                "SELECT thread_id, cache_read_tokens FROM ember.shadow_runs WHERE path = %s",
                (path,),
            ).fetchall()
        )
    assert row is not None and props is not None and pointers is not None
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
        "valid_pointers": int(pointers[0] or 0),
        "pointers": int(pointers[1] or 0),
        "cited_rows": int(pointers[2] or 0),
        "per_thread_read": per_thread,
        "price_input": Decimal(price[0] if price and price[0] is not None else 0),
    }


def run_size(threads: int, scale: int) -> tuple[dict[str, Any], dict[str, Any], float]:
    """One corpus digested hot and, from a copy, cold: (hot figures, cold figures, hot share)."""
    hot_url = scratch_database(HOT_DB)
    cold_url = with_database(database_url(), COLD_DB)
    try:
        with SimServer(responder="heuristic") as sim:
            old_prefix = record_corpus(hot_url, sim, threads, scale)
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

            digest(hot_url, sim, threads, "SELECT ember.waiting_for_user('default', %s)")
            hot = figures(hot_url, "hot")
            digest(cold_url, sim, threads, "SELECT ember.task_ended('default', %s)")
            cold = figures(cold_url, "cold")
    finally:
        drop_scratch(COLD_DB)
        drop_scratch(HOT_DB)
    old = sum(old_prefix[t] for t in hot["per_thread_read"])
    return hot, cold, hot["read"] / old if old else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=200)
    args = parser.parse_args()

    rows = []
    notes = []
    for size, scale in SIZES.items():
        hot, cold, share = run_size(args.threads, scale)
        for name, f in (("hot", hot), ("cold", cold)):
            per_k = f["cost"] / f["messages"] * 1000 if f["messages"] else Decimal("NaN")
            input_total = f["read"] + f["written"] + f["uncached"]
            uncached_share = f["uncached"] / input_total if input_total else 0.0
            validity = f["valid_pointers"] / f["pointers"] if f["pointers"] else 0.0
            cited = f["cited_rows"] / f["messages"] if f["messages"] else 0.0
            print(
                f"B4 {size} shadow {name}: {f['completed']}/{f['runs']} runs completed, "
                f"{f['messages']} messages digested, ${f['cost']:.4f} in all, "
                f"${per_k:.4f} per 1,000 digested messages, uncached {uncached_share:.1%} "
                f"of input, evidence validity {validity:.3f}, rows cited {cited:.3f}"
            )
            rows.append(
                f"| {size} | {name} | {f['completed']}/{f['runs']} | {f['messages']} "
                f"| {f['read']:,} | {f['written']:,} | {f['uncached']:,} "
                f"| {uncached_share:.1%} | {f['output']:,} | ${f['cost']:.4f} | ${per_k:.4f} "
                f"| {validity:.3f} | {cited:.3f} |"
            )
        ratio = hot["cost"] / cold["cost"] if cold["cost"] else Decimal("NaN")
        # The hot path's floor: what it would cost with no uncached input at all (its cache
        # reads and its output only), against the cold path as measured.
        floor = hot["cost"] - hot["uncached"] * hot["price_input"] / Decimal(1_000_000)
        floor_ratio = floor / cold["cost"] if cold["cost"] else Decimal("NaN")
        print(
            f"B4 {size} hot/cold cost: {ratio:.2f}; with no uncached input {floor_ratio:.2f};"
            f" hot cache-read share {share:.3f}"
        )
        notes.append(
            f"- {size}: hot costs {ratio:.2f}x cold; with no uncached input at all (its cache "
            f"reads and output alone) it would cost {floor_ratio:.2f}x cold; hot path "
            f"cache-read share of old-prefix tokens {share:.3f} "
            f"(target >= 0.95: {'meets' if share >= 0.95 else 'misses'})"
        )
    lines = [
        "## B4: shadow cost at list price (generated corpus, ember sim)",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {machine()}; "
        f"{args.threads} threads of 3 to 23 messages at each size, recorded through the SDK "
        "with the capture hook (30k: every message's context twenty times longer); hot on "
        f"{MODEL}, cold on the light tier. Token counts are the simulator's "
        "estimate (one token per four characters), prices the registry's "
        "snapshot: an estimate, not a bill. Validity: pointers of valid proposals over all "
        "pointers; cited: digested rows a valid proposal cites.",
        "",
        "| size | path | runs completed | messages digested | cache read | cache written "
        "| uncached input | uncached share | output | USD | USD per 1,000 messages "
        "| validity | cited |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        *notes,
        "",
        "Where hot costs more with no uncached input at all, the tail is not what decides: the "
        f"same answer, priced at {MODEL}'s output rate rather than the light tier's, costs more "
        "than all the input the cache saves. Only a shorter answer or a longer prefix moves "
        "that; the `hot_max_cost_ratio` setting sends such threads cold on the claim's own "
        "prediction (docs/comparison.md).",
        "",
    ]
    path = write_section("b4", "\n".join(lines))
    print(f"B4 written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
