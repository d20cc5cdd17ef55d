"""B1: the write path against a plain INSERT.

Single rows: append_message, one row per autocommit statement, against a plain single-row INSERT
into a table of the same shape with the same indexes and no triggers; and the same inside one
transaction, where the commit's flush to disk no longer hides what a statement costs. Bulk:
append_messages of 20,000 rows against one multi-row INSERT of the same rows into that table,
and a COPY of them. The sides run interleaved in rounds, so a noisy neighbour slows all alike.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import time

import psycopg
from _support import scratch_database, verdict, write_section

SINGLE_ROUNDS = 20
SINGLE_PER_ROUND = 100
BULK_ROWS = 20_000
BULK_ROUNDS = 5

COPY_ROWS = (
    "COPY bench_plain (seq, thread_id, generation_id, role, author, content, created_at) "
    "FROM STDIN"
)
PLAIN_ONE = (
    "INSERT INTO bench_plain (seq, thread_id, generation_id, role, author, content, created_at) "
    "VALUES (nextval('ember.message_seq'), %s, %s, 'assistant', 'agent', %s, clock_timestamp())"
)


def main() -> None:
    with scratch_database("ember_bench_b1") as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT ember.create_thread('default', 'w', 'side')")
        conn.execute("SELECT ember.create_thread('default', 'p', 'side')")
        row = conn.execute("SELECT ember.current_generation('default', 'p')").fetchone()
        assert row is not None
        generation = row[0]
        conn.execute("CREATE TABLE bench_plain (LIKE ember.messages INCLUDING ALL)")
        text = "an ordinary assistant reply of a realistic length, about one line of text"

        api = plain = 0.0
        for r in range(SINGLE_ROUNDS):
            start = time.perf_counter()
            for i in range(SINGLE_PER_ROUND):
                conn.execute(
                    "SELECT ember.append_message('default', 'w', 'assistant', %s)", (f"{text} {r}.{i}",)
                )
            api += time.perf_counter() - start
            start = time.perf_counter()
            for i in range(SINGLE_PER_ROUND):
                conn.execute(PLAIN_ONE, ("p", generation, f"{text} {r}.{i}"))
            plain += time.perf_counter() - start
        n = SINGLE_ROUNDS * SINGLE_PER_ROUND
        single_ratio = api / plain
        print(
            f"B1 single: append_message {n / api:,.0f} rows/s, plain INSERT {n / plain:,.0f} rows/s, "
            f"ratio {single_ratio:.2f}"
        )
        tx_api = tx_plain = 0.0
        for r in range(SINGLE_ROUNDS):
            with conn.transaction():
                start = time.perf_counter()
                for i in range(SINGLE_PER_ROUND):
                    conn.execute(
                        "SELECT ember.append_message('default', 'w', 'assistant', %s)", (f"{text} t{r}.{i}",)
                    )
                tx_api += time.perf_counter() - start
            with conn.transaction():
                start = time.perf_counter()
                for i in range(SINGLE_PER_ROUND):
                    conn.execute(PLAIN_ONE, ("p", generation, f"{text} t{r}.{i}"))
                tx_plain += time.perf_counter() - start
        tx_ratio = tx_api / tx_plain
        print(
            f"B1 single in one transaction: append_message {n / tx_api:,.0f} rows/s, plain INSERT "
            f"{n / tx_plain:,.0f} rows/s, ratio {tx_ratio:.2f}"
        )

        bulk_api: list[float] = []
        bulk_plain: list[float] = []
        bulk_copy: list[float] = []
        values = ", ".join(
            ["(nextval('ember.message_seq'), %s, %s, 'assistant', 'agent', %s, clock_timestamp())"]
            * BULK_ROWS
        )
        multi = (
            "INSERT INTO bench_plain (seq, thread_id, generation_id, role, author, content, "
            "created_at) VALUES " + values
        )
        for r in range(BULK_ROUNDS):
            rows = [
                {"role": "assistant" if i % 2 else "user", "content": f"{text} {r}.{i}"}
                for i in range(BULK_ROWS)
            ]
            payload = json.dumps(rows)
            start = time.perf_counter()
            conn.execute("SELECT ember.append_messages('default', 'w', %s::json)", (payload,))
            bulk_api.append(time.perf_counter() - start)
            params: list[object] = []
            for i in range(BULK_ROWS):
                params += ["p", generation, f"{text} {r}.{i}"]
            start = time.perf_counter()
            conn.execute(multi, params)
            bulk_plain.append(time.perf_counter() - start)
            start = time.perf_counter()
            stamp = dt.datetime.now(dt.UTC)
            with conn.cursor() as cur, cur.copy(COPY_ROWS) as copy:
                for i, row in enumerate(rows):
                    seq = -(r * BULK_ROWS + i + 1)  # below every drawn seq: no clash
                    copy.write_row((seq, "p", generation, "assistant", "agent", row["content"], stamp))
            bulk_copy.append(time.perf_counter() - start)
        api_s = statistics.median(bulk_api)
        plain_s = statistics.median(bulk_plain)
        copy_s = statistics.median(bulk_copy)
        bulk_ratio = api_s / plain_s
        print(
            f"B1 bulk ({BULK_ROWS} rows): append_messages {api_s * 1000:.0f} ms "
            f"({BULK_ROWS / api_s:,.0f} rows/s), multi-row INSERT {plain_s * 1000:.0f} ms, "
            f"COPY {copy_s * 1000:.0f} ms; ratio {bulk_ratio:.2f} / {api_s / copy_s:.2f}"
        )
        count = conn.execute("SELECT count(*) FROM ember.messages WHERE thread_id = 'w'").fetchone()
        assert count is not None and count[0] == 2 * n + BULK_ROWS * BULK_ROUNDS

    write_section(
        "b1",
        "\n".join(
            [
                "## B1: write path",
                "",
                "Against a table of the same shape with the same indexes and no triggers, the two",
                "sides interleaved in rounds. Half the bulk rows are human user rows (each one",
                "withdraws the thread's shadow work, as a single append does).",
                "",
                "| | Ember | plain INSERT | ratio | target |",
                "|---|---|---|---|---|",
                f"| one row per autocommit statement ({n} rows) | {n / api:,.0f} rows/s | "
                f"{n / plain:,.0f} rows/s | {single_ratio:.2f} | ≤ 1.5: "
                f"{verdict(single_ratio, 1.5)} |",
                f"| one row per statement, {SINGLE_PER_ROUND} to a transaction ({n} rows) | "
                f"{n / tx_api:,.0f} rows/s | {n / tx_plain:,.0f} rows/s | {tx_ratio:.2f} | |",
                f"| {BULK_ROWS:,} rows in one call (median of {BULK_ROUNDS}) | "
                f"{api_s * 1000:.0f} ms | {plain_s * 1000:.0f} ms | {bulk_ratio:.2f} | ≤ 2: "
                f"{verdict(bulk_ratio, 2)} |",
                f"| the same rows against COPY into that table | {api_s * 1000:.0f} ms | "
                f"COPY {copy_s * 1000:.0f} ms | {api_s / copy_s:.2f} | |",
            ]
        ),
    )


if __name__ == "__main__":
    main()
