"""The bare worker loop B3 measures Ember's worker against (not a benchmark itself).

Each of `concurrency` tasks, on its own connection: claim one job with a bare SKIP LOCKED
claim, make one HTTP POST to the same `ember sim` through the same SDK, insert one row with the
answer, commit; until the queue is empty. Prints one JSON line: elapsed seconds, CPU seconds of
this process, runs.

    python bench/_bare_worker.py URL BASE_URL CONCURRENCY
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import psycopg
from anthropic import AsyncAnthropic

CLAIM = """
UPDATE public.bare_jobs SET claimed_by = %s
WHERE id = (
    SELECT id FROM public.bare_jobs WHERE claimed_by IS NULL
    ORDER BY signalled_at, id LIMIT 1 FOR UPDATE SKIP LOCKED
)
RETURNING id, prompt
"""
RECORD = "INSERT INTO public.bare_results (job_id, answer, input_tokens) VALUES (%s, %s, %s)"


async def loop(url: str, client: AsyncAnthropic, name: str) -> int:
    done = 0
    conn: psycopg.AsyncConnection[Any] = await psycopg.AsyncConnection.connect(url)
    async with conn:
        while True:
            cur = await conn.execute(CLAIM, (name,))
            row = await cur.fetchone()
            await conn.commit()
            if row is None:
                return done
            reply = await client.messages.create(
                model="claude-haiku-4-5",
                max_tokens=256,
                messages=[{"role": "user", "content": str(row[1])}],
            )
            text = "".join(getattr(b, "text", "") for b in reply.content)
            await conn.execute(RECORD, (row[0], text, reply.usage.input_tokens))
            await conn.commit()
            done += 1


async def main(url: str, base_url: str, concurrency: int) -> None:
    client = AsyncAnthropic(base_url=base_url, api_key="bench", max_retries=0)
    cpu0, t0 = time.process_time(), time.monotonic()
    counts = await asyncio.gather(*(loop(url, client, f"b{i}") for i in range(concurrency)))
    elapsed, cpu = time.monotonic() - t0, time.process_time() - cpu0
    print(json.dumps({"elapsed": elapsed, "cpu": cpu, "runs": sum(counts)}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
