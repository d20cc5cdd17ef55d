"""Comparison test data: threads and messages through the host API, shadow runs and proposals as
the submit writes them, and steward facts and runs inserted directly (the steward's own write path
is another issue's; its tables are what the comparison reads).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.types.json import Jsonb

AT = "2030-01-01 10:00+00"
HEALTH_MODEL = "claude-haiku-4-5-20251001"  # the simulator resolves the dated name to its alias


def setup(conn: psycopg.Connection[Any]) -> None:
    """Shadow on, a health category, and a light model tagged for it (second in registry order,
    so the untagged claude-haiku-4-5 stays the route for unlabelled groups)."""
    conn.execute("SELECT ember.shadow_activate(%s)", (AT,))
    conn.execute("SELECT ember.define_category('health')")
    conn.execute(
        """
        INSERT INTO ember.models (
            id, position, tier, tags, min_cacheable_tokens, thinking_retention, price_as_of,
            price_input, price_output, price_cache_write_5m, price_cache_write_1h, price_cache_read
        )
        SELECT %s, 11, tier, '{health}', min_cacheable_tokens, thinking_retention, price_as_of,
               price_input, price_output, price_cache_write_5m, price_cache_write_1h,
               price_cache_read
        FROM ember.models WHERE id = 'claude-haiku-4-5'
        """,
        (HEALTH_MODEL,),
    )


def thread(conn: psycopg.Connection[Any], name: str, category: str | None = None) -> None:
    conn.execute(
        "SELECT ember.create_thread('default', %s, 'side', p_category => %s)", (name, category)
    )


def message(conn: psycopg.Connection[Any], name: str, content: str) -> int:
    row = conn.execute(
        "SELECT ember.append_message('default', %s, 'user', %s, p_author => 'human', p_now => %s)",
        (name, content, AT),
    ).fetchone()
    assert row is not None
    return int(row[0])


def shadow_run(
    conn: psycopg.Connection[Any], name: str, latency_ms: int = 1500, path: str = "cold"
) -> int:
    row = conn.execute(
        """
        INSERT INTO ember.shadow_runs (
            thread_id, generation_id, path, model, status, from_seq, through_seq,
            input_tokens, output_tokens, price_as_of, price_input, price_output,
            price_cache_write_5m, price_cache_write_1h, price_cache_read,
            started_at, finished_at, latency_ms, worker, lease_token, lease_expires_at
        )
        SELECT %s, ember.current_generation('default', %s), %s, m.id, 'completed', 0, 0, 20000, 500,
               m.price_as_of, m.price_input, m.price_output, m.price_cache_write_5m,
               m.price_cache_write_1h, m.price_cache_read, %s::timestamptz,
               %s::timestamptz + make_interval(secs => %s / 1000.0), %s, 'w',
               gen_random_uuid(), %s::timestamptz + interval '10 minutes'
        FROM ember.models AS m WHERE m.id = 'claude-haiku-4-5'
        RETURNING id
        """,
        (name, name, path, AT, AT, latency_ms, latency_ms, AT),
    ).fetchone()
    assert row is not None
    return int(row[0])


def proposal(
    conn: psycopg.Connection[Any],
    run: int,
    text: str,
    message_id: int,
    embedding: list[float] | None = None,
) -> int:
    row = conn.execute(
        """
        INSERT INTO ember.shadow_proposals (
            run_id, thread_id, generation_id, ordinal, text, evidence_kind, evidence, categories,
            created_at, embedding
        )
        SELECT r.id, r.thread_id, r.generation_id,
               (SELECT count(*) + 1 FROM ember.shadow_proposals AS p WHERE p.run_id = r.id),
               %s, 'user-stated', %s, ember.generation_labels(r.generation_id), %s, %s
        FROM ember.shadow_runs AS r WHERE r.id = %s
        RETURNING id
        """,
        (text, Jsonb([{"message_id": message_id}]), AT, _vec(embedding), run),
    ).fetchone()
    assert row is not None
    return int(row[0])


def fact(
    conn: psycopg.Connection[Any],
    text: str,
    message_id: int,
    categories: list[str] | None = None,
    embedding: list[float] | None = None,
) -> int:
    # The embedding is sent untyped and takes its column's type, whichever schema pgvector's
    # type lives in.
    row = conn.execute(
        """
        INSERT INTO ember.facts (text, evidence_kind, categories, created_at, embedding)
        VALUES (%s, 'user-stated', %s, %s::timestamptz + interval '5 minutes', %s)
        RETURNING id
        """,
        (text, categories or [], AT, _vec(embedding)),
    ).fetchone()
    assert row is not None
    conn.execute(
        "INSERT INTO ember.fact_evidence (fact_id, ordinal, message_id) VALUES (%s, 1, %s)",
        (row[0], message_id),
    )
    return int(row[0])


def steward_run(conn: psycopg.Connection[Any], latency_ms: int, priced: bool = True) -> None:
    conn.execute(
        """
        INSERT INTO ember.steward_runs (
            generation_id, read_message_ids, read_generations, read_tokens,
            model, status, input_tokens, output_tokens, price_as_of, price_input, price_output,
            price_cache_write_5m, price_cache_write_1h, price_cache_read, started_at, finished_at,
            latency_ms, worker, lease_token, lease_expires_at
        ) VALUES (
            ember.current_generation('default', ember.ensure_steward_thread('default')),
            '{}', '{}', 0,
            'claude-haiku-4-5', 'completed', 50000, 2000, '2026-11-30', %s, 5, 1.25, 2, 0.1,
            %s, %s::timestamptz + interval '1 minute', %s, 'w', gen_random_uuid(),
            %s::timestamptz + interval '10 minutes'
        )
        """,
        (1 if priced else None, AT, AT, latency_ms, AT),
    )


def seal(conn: psycopg.Connection[Any], name: str) -> None:
    conn.execute("UPDATE ember.threads SET seal_tier = 'isolated' WHERE id = %s", (name,))


def _vec(values: list[float] | None) -> str | None:
    return None if values is None else "[" + ",".join(str(v) for v in values) + "]"


def seed_case(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """The seed's case in thread `deploy`, an exact match in `db`, a health pair in `diet`, and a
    thread `secret` with a proposal and a fact, sealed afterwards."""
    setup(conn)
    ids: dict[str, int] = {}
    for name, category in (("deploy", None), ("db", None), ("diet", "health"), ("secret", None)):
        thread(conn, name, category)
    ids["m_deploy"] = message(conn, "deploy", "部署使用独立工作区")
    ids["m_db"] = message(conn, "db", "We use Postgres.")
    ids["m_diet"] = message(conn, "diet", "I stopped eating sugar.")
    ids["m_secret"] = message(conn, "secret", "The launch code is 1234.")
    runs = {
        n: shadow_run(conn, n, latency)
        for n, latency in (("deploy", 1000), ("db", 2000), ("diet", 3000), ("secret", 4000))
    }
    ids["p_deploy"] = proposal(conn, runs["deploy"], "部署使用独立工作区。", ids["m_deploy"])
    ids["f_deploy"] = fact(conn, "部署有独立工作区", ids["m_deploy"])
    # Full-width forms on purpose: NFKC folds them to the ASCII of the fact.
    ids["p_db"] = proposal(conn, runs["db"], "ＷＥ ＵＳＥ Ｐｏｓｔｇｒｅｓ！", ids["m_db"])  # noqa: RUF001
    ids["f_db"] = fact(conn, "we use postgres", ids["m_db"])
    ids["p_diet"] = proposal(conn, runs["diet"], "No sugar any more", ids["m_diet"])
    ids["f_diet"] = fact(conn, "The user avoids sugar", ids["m_diet"], ["health"])
    ids["p_secret"] = proposal(conn, runs["secret"], "Launch code 1234", ids["m_secret"])
    ids["f_secret"] = fact(conn, "The launch code is 1234", ids["m_secret"])
    seal(conn, "secret")
    steward_run(conn, 5000)
    steward_run(conn, 7000)
    return ids
