"""B7: `ember import` throughput into an empty schema, in messages per second.

A generated history (200 threads, 5 generations each, 50,000 messages, a third of them human
rows, some with raw blocks and tool results) is written as an import file, then imported once
through the same code path as `ember import` (COPY into the staging table, set-based checks and
writes, one transaction). Re-importing the same file (every record already present) is timed too.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import psycopg
from _support import OUT, scratch_database, verdict, write_section

from ember.transfer import format_record, header_line, run_import

THREADS = 200
GENERATIONS = 5
MESSAGES = 50_000


def stamp(minutes: float) -> str:
    seconds = int(minutes * 60)
    day, rest = divmod(seconds, 86_400)
    hour, rest = divmod(rest, 3600)
    minute, second = divmod(rest, 60)
    return f"2026-03-{1 + day:02d}T{hour:02d}:{minute:02d}:{second:02d}.000000Z"


def write_corpus(path: Path) -> None:
    rng = random.Random(13)
    per_generation = MESSAGES // THREADS // GENERATIONS
    lines = [header_line()]
    for t in range(THREADS):
        lines.append(format_record({
            "type": "thread", "id": f"t{t:04d}", "kind": "side", "title": f"Topic {t}",
            "category": None, "seal_tier": "open", "model": None, "status": "active",
            "created_at": stamp(t),
        }))  # fmt: skip
    for t in range(THREADS):
        for g in range(GENERATIONS):
            start = t + g * 600
            lines.append(format_record({
                "type": "generation", "thread": f"t{t:04d}", "ordinal": g + 1,
                "started_at": stamp(start),
                "ended_at": stamp(start + 599) if g < GENERATIONS - 1 else None,
            }))  # fmt: skip
    for g in range(GENERATIONS):
        for k in range(per_generation):
            for t in range(THREADS):
                role = ("user", "assistant", "tool_result")[k % 3]
                record = {
                    "type": "message", "thread": f"t{t:04d}", "generation": g + 1, "role": role,
                    "author": {"user": "human", "assistant": "agent"}.get(role, "system"),
                    "content": f"row {k} of session {g}: " + "lorem ipsum " * rng.randint(2, 30),
                    "blocks": None, "tool_call_id": None, "tool_name": None, "tool_status": None,
                    "from_thread": None, "created_at": stamp(t + g * 600 + k * 0.5),
                }  # fmt: skip
                if role == "assistant" and k % 2:
                    record["blocks"] = '[{"type": "text", "text": "reply"}]'
                if role == "tool_result":
                    record.update(tool_call_id=f"c{k}", tool_name="search", tool_status="ok")
                lines.append(format_record(record))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    OUT.mkdir(exist_ok=True)
    path = OUT / "b7_corpus.jsonl"
    write_corpus(path)
    size_mb = path.stat().st_size / 1e6
    with scratch_database("ember_bench_b7") as url, psycopg.connect(url) as conn:
        start = time.perf_counter()
        result = run_import(conn, path, partial=False, progress=False)
        first = time.perf_counter() - start
        assert result.written and not result.rejected, result.rejected[:5]
        assert result.messages == MESSAGES
        start = time.perf_counter()
        again = run_import(conn, path, partial=False, progress=False)
        second = time.perf_counter() - start
        assert again.present == MESSAGES and again.messages == 0
    path.unlink()
    rate = MESSAGES / first
    print(f"B7 import: {MESSAGES} messages in {first:.2f} s = {rate:,.0f} messages/s")
    print(f"B7 re-import (all present): {second:.2f} s")
    write_section("b7", "\n".join([
        "## B7: import throughput",
        "",
        f"`ember import` of a generated file ({THREADS} threads, {THREADS * GENERATIONS} "
        f"generations, {MESSAGES:,} messages, {size_mb:.0f} MB) into an empty schema, one "
        "transaction, through the same path as the command (COPY to staging, set-based checks "
        "and writes, every row trigger).",
        "",
        "| | time | messages/s | target |",
        "|---|---|---|---|",
        f"| import | {first:.2f} s | {rate:,.0f} | ≥ 50,000: {verdict(rate, 50_000, lower_is_better=False)} |",
        f"| re-import of the same file (no-op) | {second:.2f} s | {MESSAGES / second:,.0f} | |",
    ]))  # fmt: skip


if __name__ == "__main__":
    main()
