"""B7: `ember import` throughput into an empty schema, in messages per second.

A generated history (200 threads, 5 generations each, 50,000 messages, a third of them human
rows, some with raw blocks and tool results) is written as an import file, then imported once
through the same code path as `ember import` (COPY into the staging table, set-based checks and
writes, one transaction, then ANALYZE of the tables it wrote). Re-importing the same file (every
record already present) is timed too. The baseline, in the same run: the same 50,000 rows, already
split into columns, COPYed into a table of the messages' shape (LIKE ember.messages INCLUDING ALL:
its columns, checks and indexes, no triggers and no foreign keys).
"""

from __future__ import annotations

import json
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


def copy_baseline(conn: psycopg.Connection, path: Path) -> float:
    """Seconds to COPY the file's messages, split into columns, into a same-shaped table."""
    conn.execute("CREATE TABLE bench_copy (LIKE ember.messages INCLUDING ALL)")
    conn.commit()
    row = conn.execute("SELECT ember.current_generation('default', 't0000')").fetchone()
    assert row is not None
    generation = row[0]
    columns = (
        "seq, thread_id, generation_id, role, author, content, blocks, tool_call_id, "
        "tool_name, tool_status, created_at"
    )
    start = time.perf_counter()
    with path.open(encoding="utf-8") as handle, conn.cursor() as cur:
        next(handle)
        with cur.copy(f"COPY bench_copy ({columns}) FROM STDIN") as copy:
            seq = 0
            for line in handle:
                record = json.loads(line)
                if record["type"] != "message":
                    continue
                seq += 1
                copy.write_row((
                    seq, record["thread"], generation, record["role"], record["author"],
                    record["content"], record["blocks"], record["tool_call_id"],
                    record["tool_name"], record["tool_status"], record["created_at"],
                ))  # fmt: skip
    conn.commit()
    return time.perf_counter() - start


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
        assert again.generations_present == THREADS * GENERATIONS
        assert again.threads_present == THREADS
        copy_s = copy_baseline(conn, path)
    path.unlink()
    rate = MESSAGES / first
    again_rate = MESSAGES / second
    copy_rate = MESSAGES / copy_s
    print(f"B7 import: {MESSAGES} messages in {first:.2f} s = {rate:,.0f} messages/s")
    print(f"B7 re-import (all present): {second:.3f} s = {again_rate:,.0f} messages/s")
    print(
        f"B7 COPY into a same-shaped table: {copy_s:.2f} s = {copy_rate:,.0f} messages/s; "
        f"import / COPY {first / copy_s:.2f}, re-import / COPY {second / copy_s:.2f}"
    )
    write_section("b7", "\n".join([
        "## B7: import throughput",
        "",
        f"`ember import` of a generated file ({THREADS} threads, {THREADS * GENERATIONS} "
        f"generations, {MESSAGES:,} messages, {size_mb:.0f} MB) into an empty schema, one "
        "transaction, through the same path as the command (COPY to staging, set-based checks "
        "and writes, every row trigger).",
        "",
        "| | time | messages/s | / COPY | target |",
        "|---|---|---|---|---|",
        f"| import (with ANALYZE) | {first:.2f} s | {rate:,.0f} | {first / copy_s:.2f} | "
        f"≥ 50,000: {verdict(rate, 50_000, lower_is_better=False)} |",
        f"| re-import of the same file (no-op) | {second:.3f} s | {again_rate:,.0f} | "
        f"{second / copy_s:.2f} | ≥ 200,000: {verdict(again_rate, 200_000, lower_is_better=False)} |",
        f"| baseline: COPY of the same rows into a same-shaped table | {copy_s:.2f} s | "
        f"{copy_rate:,.0f} | 1 | |",
    ]))  # fmt: skip


if __name__ == "__main__":
    main()
