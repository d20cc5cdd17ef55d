"""The SQL model registry and the simulator's model table describe the same models."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
SIM_MODELS = ROOT / "worker" / "ember" / "sim" / "models.json"


def test_sql_seed_matches_the_simulator_table(db: str) -> None:
    table = json.loads(SIM_MODELS.read_text())
    expected = {
        m["name"]: (
            m["tier"],
            m["min_cacheable_tokens"],
            m["thinking_retention"],
            m["thinking_before_system"],
            m["adaptive_thinking_only"],
            table["price_as_of"],
            *(
                Decimal(str(m["prices_per_mtok"][k]))
                for k in ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")
            ),
        )
        for m in table["models"]
    }
    with psycopg.connect(db) as conn:
        rows = conn.execute(
            """SELECT id, tier, min_cacheable_tokens, thinking_retention, thinking_before_system,
                      adaptive_thinking_only, price_as_of::text,
                      price_input, price_output, price_cache_write_5m, price_cache_write_1h,
                      price_cache_read
               FROM ember.models"""
        ).fetchall()
    actual = {r[0]: tuple(r[1:]) for r in rows}
    assert actual == expected
