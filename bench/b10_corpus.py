"""B10: a multi-session corpus shaped like LoCoMo, imported and digested at 1x and 10x.

The corpus is generated (no download): 10 conversations as `side` threads, 272 sessions as
dated generations (27 or 28 a conversation, days apart, the last one of each thread still open,
as a live history would leave it), two speakers (the person as a human user, the agent as
assistant), 5,882 turns; some turns hold line breaks and tabs. At 10x the same shape is written
ten times over with distinct thread ids (100 conversations, 58,820 turns). Every row is from
2023, so no generation has idle time left to wait for.

For each size, in a fresh database: `ensure_steward_thread()` and `shadow_activate()` first,
then `ember import` of the file (its code path, with its ANALYZE). Then, as the worker would
meet them, the latency (median of 5, each call in a transaction rolled back) of `tick()`, of
`claim_shadow_run` after one tick has made offers, of `claim_steward_run`, of
`steward_backlog_generations()` and of a count of the backlog. Then `ember worker --pipelines
shadow,steward` (tick every second) against `ember sim` (the rule-based responder) drains it:
the drain time runs from the worker's start until no generation of the corpus is unread by
shadow, no row is undigested by the steward and no run is running. Every fact and proposal text
is then checked for a rendering escape (`\\n`, `\\r`, `\\t`, `\\\\`, `\\uXXXX`).

Targets (issues 21 and 30): drain 10x / 1x <= 12; each latency 10x / 1x <= 1.5.

    .venv/bin/python bench/b10_corpus.py [--scales 1,10] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from _worker_common import (
    OUT,
    drop_scratch,
    machine,
    scratch_database,
    start_worker,
    stop_worker,
    write_section,
)

from ember.sim import Heuristic, SimServer
from ember.transfer import format_record, header_line, run_import

CONVERSATIONS = 10
SESSIONS = [28, 28] + [27] * 8  # 272
TURNS = 5_882
STEWARD_MODEL = "claude-haiku-4-5"
REPEAT = 5

PEOPLE = ["Caroline", "Melanie", "Jon", "Gina", "John", "Maria", "Joanna", "Nate", "Tim", "Audrey"]
PLACES = ["Lisbon", "Osaka", "Denver", "Porto", "Nairobi", "Oslo", "Lima", "Hanoi", "Quebec"]
HOBBIES = ["pottery", "the cello", "rock climbing", "sourdough baking", "chess", "painting"]
PETS = ["a beagle called Max", "two cats", "a parrot", "a rescue greyhound", "goldfish"]
JOBS = ["a nurse", "a teacher", "a software engineer", "a counsellor", "a chef", "an architect"]


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _turns_per_session() -> list[int]:
    sessions = sum(SESSIONS)
    base, extra = divmod(TURNS, sessions)
    return [base + (1 if i < extra else 0) for i in range(sessions)]


def _user_turn(rng: random.Random, name: str) -> str:
    choice = rng.randrange(8)
    if choice == 0:
        return f"I moved to {rng.choice(PLACES)} last month, {name} here still getting used to it."
    if choice == 1:
        return f"I've been learning {rng.choice(HOBBIES)} on weekends, it calms me down."
    if choice == 2:
        return f"We adopted {rng.choice(PETS)} and the flat is chaos now."
    if choice == 3:
        return f"I work as {rng.choice(JOBS)}; the night shifts are hard."
    if choice == 4:
        # Line breaks and a tab, as people paste lists: the renderer escapes them on the page.
        items = rng.sample(["milk", "eggs", "flour", "tea", "rice", "apples"], 3)
        return "My shopping list for the trip:\n- " + "\n- ".join(items) + "\tthat's all."
    if choice == 5:
        return f"My sister is visiting from {rng.choice(PLACES)} next week."
    if choice == 6:
        return "Honestly I prefer mornings, I never manage anything after 9 pm."
    return f"Yesterday I finally finished the {rng.choice(HOBBIES)} project I told you about."


def _assistant_turn(rng: random.Random) -> str:
    return rng.choice([
        "That sounds wonderful! How are you finding it so far?",
        "Oh nice, tell me more about that.",
        "That must be a big change. What has been the hardest part?",
        "I love that. Do you want me to remember anything for next time?",
        "Good luck with it! Let me know how it goes.",
    ])  # fmt: skip


def write_corpus(path: Path, scale: int) -> tuple[int, int, int]:
    """The corpus at `scale` times the base size; returns (threads, generations, messages)."""
    rng = random.Random(2023 + scale)
    per_session = _turns_per_session()
    lines = [header_line()]
    threads = generations = messages = 0
    for copy in range(scale):
        session_index = 0
        for c in range(CONVERSATIONS):
            tid = f"locomo-{copy:02d}-{c:02d}"
            clock = datetime(2023, 1, 1, 9, 0, tzinfo=UTC) + timedelta(days=c)
            person = PEOPLE[c % len(PEOPLE)]
            lines.append(format_record({
                "type": "thread", "id": tid, "kind": "side", "title": f"{person} and the agent",
                "category": None, "seal_tier": "open", "model": None, "status": "active",
                "created_at": _stamp(clock),
            }))  # fmt: skip
            threads += 1
            rows: list[str] = []
            for s in range(SESSIONS[c]):
                start = clock
                turns = per_session[session_index]
                session_index += 1
                for k in range(turns):
                    role = "user" if k % 2 == 0 else "assistant"
                    rows.append(format_record({
                        "type": "message", "thread": tid, "generation": s + 1, "role": role,
                        "author": "human" if role == "user" else "agent",
                        "content": _user_turn(rng, person) if role == "user" else _assistant_turn(rng),
                        "blocks": None, "tool_call_id": None, "tool_name": None,
                        "tool_status": None, "from_thread": None,
                        "created_at": _stamp(clock),
                    }))  # fmt: skip
                    clock += timedelta(seconds=30 + rng.randrange(60))
                    messages += 1
                last = s == SESSIONS[c] - 1
                lines.append(format_record({
                    "type": "generation", "thread": tid, "ordinal": s + 1,
                    "started_at": _stamp(start),
                    "ended_at": None if last else _stamp(clock + timedelta(minutes=5)),
                }))  # fmt: skip
                generations += 1
                clock += timedelta(days=3 + rng.randrange(8))
            lines += rows
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return threads, generations, messages


def _median_ms(conn: psycopg.Connection[Any], sql: str, *, rollback: bool = True) -> float:
    times = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        conn.execute(sql)
        times.append((time.perf_counter() - start) * 1000)
        if rollback:
            conn.rollback()
    return statistics.median(times)


DONE = """
SELECT
    (SELECT count(*) FROM ember.generation_progress WHERE unread AND thread_id LIKE 'locomo-%%'),
    (SELECT count(*) FROM ember.messages WHERE episode_id IS NULL AND thread_id LIKE 'locomo-%%'),
    (SELECT count(*) FROM ember.shadow_runs WHERE status = 'running')
    + (SELECT count(*) FROM ember.steward_runs WHERE status = 'running')
"""

ESCAPE = r"'\\[nrt\\]|\\u[0-9a-fA-F]{4}'"


def run(scale: int, concurrency: int, timeout: float) -> dict[str, Any]:
    name = f"ember_bench_b10_{scale}x"
    url = scratch_database(name)
    path = OUT / f"b10_corpus_{scale}x.jsonl"
    OUT.mkdir(parents=True, exist_ok=True)
    try:
        threads, generations, messages = write_corpus(path, scale)
        with psycopg.connect(url) as conn:
            conn.execute("SELECT ember.create_thread('default', 'main', 'main', NULL, NULL, 'open', %s)",
                         (STEWARD_MODEL,))  # fmt: skip
            conn.execute("SELECT ember.ensure_steward_thread('default')")
            conn.execute("SELECT ember.shadow_activate()")
            conn.commit()
            start = time.perf_counter()
            result = run_import(conn, path, partial=False, progress=False)
            import_s = time.perf_counter() - start
            assert result.written and not result.rejected, result.rejected[:3]
            assert (result.threads, result.generations, result.messages) == (
                threads, generations, messages,
            ), result  # fmt: skip
            figures: dict[str, Any] = {
                "scale": scale, "threads": threads, "generations": generations,
                "messages": messages, "import_s": import_s,
            }  # fmt: skip
            figures["tick_ms"] = _median_ms(conn, "SELECT ember.tick()")
            conn.execute("SELECT ember.tick()")  # the offers a worker's first tick would make
            conn.commit()
            figures["claim_shadow_ms"] = _median_ms(
                conn, "SELECT ember.claim_shadow_run('bench', '5 minutes')"
            )
            figures["claim_steward_ms"] = _median_ms(
                conn, "SELECT ember.claim_steward_run('bench', '5 minutes')"
            )
            figures["backlog_generations_ms"] = _median_ms(
                conn, "SELECT count(*) FROM ember.steward_backlog_generations('default')"
            )
            figures["backlog_count_ms"] = _median_ms(conn, "SELECT count(*) FROM ember.backlog")
        with SimServer(responder=Heuristic()) as sim:
            start = time.perf_counter()
            proc = start_worker(
                url, sim.base_url, "--pipelines", "shadow,steward", "--poll-interval", "1",
                "--tick-interval", "1", "--concurrency", str(concurrency),
            )  # fmt: skip
            try:
                with psycopg.connect(url, autocommit=True) as conn:
                    deadline = time.monotonic() + timeout
                    while True:
                        row = conn.execute(DONE).fetchone()
                        assert row is not None
                        if row == (0, 0, 0):
                            break
                        if time.monotonic() > deadline:
                            raise SystemExit(f"B10 {scale}x: not drained after {timeout:.0f} s: "
                                             f"unread generations, undigested rows, running = {row}")  # fmt: skip
                        time.sleep(0.25)
                figures["drain_s"] = time.perf_counter() - start
            finally:
                stop_worker(proc)
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(f"""
                SELECT
                    (SELECT count(*) FROM ember.shadow_runs WHERE status = 'completed'),
                    (SELECT count(*) FROM ember.shadow_runs WHERE status NOT IN ('completed', 'running')),
                    (SELECT count(*) FROM ember.steward_runs WHERE status = 'completed'),
                    (SELECT count(*) FROM ember.steward_runs WHERE status NOT IN ('completed', 'running')),
                    (SELECT count(*) FROM ember.facts),
                    (SELECT count(*) FROM ember.facts WHERE text ~ {ESCAPE}),
                    (SELECT count(*) FROM ember.shadow_proposals),
                    (SELECT count(*) FROM ember.shadow_proposals WHERE text ~ {ESCAPE}),
                    (SELECT count(*) FROM ember.generation_progress
                     WHERE unread AND thread_id = 'memory-steward')
            """).fetchone()  # noqa: S608 (constant text)
            assert row is not None
        keys = ("shadow_runs", "shadow_other", "steward_runs", "steward_other", "facts",
                "fact_escapes", "proposals", "proposal_escapes", "steward_unread")  # fmt: skip
        figures.update(dict(zip(keys, (int(v) for v in row), strict=True)))
        return figures
    finally:
        path.unlink(missing_ok=True)
        drop_scratch(name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", default="1,10")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=3600.0)
    args = parser.parse_args()
    scales = [int(s) for s in args.scales.split(",")]
    results = []
    for scale in scales:
        figures = run(scale, args.concurrency, args.timeout)
        results.append(figures)
        print(
            f"B10 {scale}x: {figures['messages']} turns, {figures['generations']} sessions; "
            f"import {figures['import_s']:.1f} s, drain {figures['drain_s']:.1f} s; tick "
            f"{figures['tick_ms']:.1f} ms, claim_shadow_run {figures['claim_shadow_ms']:.1f} ms, "
            f"claim_steward_run {figures['claim_steward_ms']:.1f} ms, "
            f"steward_backlog_generations {figures['backlog_generations_ms']:.1f} ms, "
            f"backlog count {figures['backlog_count_ms']:.1f} ms; runs: shadow "
            f"{figures['shadow_runs']} (+{figures['shadow_other']} not completed), steward "
            f"{figures['steward_runs']} (+{figures['steward_other']}); facts "
            f"{figures['facts']} ({figures['fact_escapes']} with a rendering escape), proposals "
            f"{figures['proposals']} ({figures['proposal_escapes']})",
            flush=True,
        )
    write_section("b10", _section(results, args.concurrency))
    return 0


def _section(results: list[dict[str, Any]], concurrency: int) -> str:
    load = os.getloadavg()
    head = [
        "## B10: a LoCoMo-shaped corpus at 1x and 10x",
        "",
        f"{machine()}; load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} at the end. "
        "A generated corpus shaped like LoCoMo (10 conversations as threads, 272 sessions as "
        "dated generations, the last of each thread open, two speakers, 5,882 turns, all from "
        "2023), and ten times over with distinct thread ids. Imported by `ember import`'s path "
        "after `ensure_steward_thread()` and `shadow_activate()`; latencies are medians of "
        f"{REPEAT} calls right after the import, each rolled back; the drain is `ember worker "
        f"--pipelines shadow,steward --tick-interval 1 --concurrency {concurrency}` against "
        "`ember sim` (rule-based responder) until nothing of the corpus is unread or undigested.",
        "",
    ]
    cols = [f"{r['scale']}x" for r in results]
    ratio = len(results) >= 2
    header = "| | " + " | ".join(cols) + (" | ratio | target |" if ratio else " |")
    rule = "|---|" + "---|" * len(cols) + ("---|---|" if ratio else "")
    rows = [header, rule]

    def line(label: str, key: str, fmt: str, target: float | None) -> None:
        values = [r[key] for r in results]
        cells = " | ".join(format(v, fmt) for v in values)
        if ratio and values[0]:
            q = values[-1] / values[0]
            verdict = "" if target is None else ("meets" if q <= target else "MISSES")
            aim = "" if target is None else f"≤ {target:g}: {verdict}"
            rows.append(f"| {label} | {cells} | {q:.2f} | {aim} |")
        else:
            rows.append(f"| {label} | {cells} |" + (" | |" if ratio else ""))

    line("turns", "messages", ",d", None)
    line("import (s)", "import_s", ".2f", None)
    line("drain (s)", "drain_s", ".1f", 12)
    line("`tick()` (ms)", "tick_ms", ".1f", 1.5)
    line("`claim_shadow_run` (ms)", "claim_shadow_ms", ".1f", 1.5)
    line("`claim_steward_run` (ms)", "claim_steward_ms", ".1f", 1.5)
    line("`steward_backlog_generations()` (ms)", "backlog_generations_ms", ".1f", 1.5)
    # A count reads every row of the backlog: it is a scan, expected to grow with it.
    line("count of the backlog, a scan (ms)", "backlog_count_ms", ".1f", None)
    line("shadow runs completed", "shadow_runs", ",d", None)
    line("shadow runs not completed", "shadow_other", ",d", None)
    line("steward runs completed", "steward_runs", ",d", None)
    line("steward runs not completed", "steward_other", ",d", None)
    line("facts", "facts", ",d", None)
    line("facts with a rendering escape", "fact_escapes", ",d", None)
    line("proposals", "proposals", ",d", None)
    line("proposals with a rendering escape", "proposal_escapes", ",d", None)
    line("steward generations left unread", "steward_unread", ",d", None)
    return "\n".join(head + rows) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
