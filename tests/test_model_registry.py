"""The model registry as data: the SQL seed equals the packaged registry file, and
`ember models load` checks a file whole (one line per problem) before storing any of it."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg

from ember.registry import PRICE_KINDS, read_registry

ROOT = Path(__file__).resolve().parents[1]
SIM_MODELS = ROOT / "worker" / "ember" / "sim" / "models.json"


def _dec(value: float | None) -> Decimal | None:
    return None if value is None else Decimal(str(value)).quantize(Decimal("0.0001"))


def _file_rows() -> dict[str, tuple[Any, ...]]:
    rows = {}
    for e in read_registry(SIM_MODELS).entries:
        prices = e.prices_per_mtok.model_dump()
        tiers = [
            (t.above_tokens, *(_dec(t.prices_per_mtok.model_dump()[k]) for k in PRICE_KINDS))
            for t in e.length_tiers
        ]
        rows[e.name] = (
            e.tier,
            e.position,
            {"5m": "00:05:00", "1h": "01:00:00", None: None}[e.cache_ttl],
            e.min_cacheable_tokens,
            e.observed_min_cacheable_tokens,
            e.thinking_retention,
            e.thinking_before_system,
            e.adaptive_thinking_only,
            e.preserved_thinking,
            sorted(e.reads_thinking_from),
            e.price_as_of.isoformat(),
            *(_dec(prices[k]) for k in PRICE_KINDS),
            tiers,
        )
    return rows


def test_sql_seed_matches_the_registry_file(db: str) -> None:
    with psycopg.connect(db) as conn:
        rows = conn.execute(
            """SELECT id, tier, position, cache_ttl::text, min_cacheable_tokens,
                      observed_min_cacheable_tokens, thinking_retention, thinking_before_system,
                      adaptive_thinking_only, preserved_thinking,
                      ARRAY(SELECT unnest(reads_thinking_from) ORDER BY 1), price_as_of::text,
                      price_input, price_output, price_cache_write_5m, price_cache_write_1h,
                      price_cache_read,
                      ARRAY(SELECT ARRAY[t.above_tokens::numeric, t.price_input, t.price_output,
                                         t.price_cache_write_5m, t.price_cache_write_1h,
                                         t.price_cache_read]
                            FROM ember.model_price_tiers AS t WHERE t.model = m.id
                            ORDER BY t.above_tokens)
               FROM ember.models AS m"""
        ).fetchall()
    actual = {r[0]: (*r[1:17], [(int(t[0]), *t[1:]) for t in r[17]]) for r in rows}
    assert actual == _file_rows()


def _ember(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ember.cli", *args],
        capture_output=True,
        text=True,
        env={"DATABASE_URL": db, "PATH": "/usr/bin:/bin"},
        check=False,
    )


def test_models_load_reports_every_problem_on_its_own_line_and_stores_nothing(
    db: str, tmp_path: Path
) -> None:
    bad = tmp_path / "models.json"
    bad.write_text(
        json.dumps(
            {
                "models": [
                    {
                        "name": "claude-new-1",
                        "tier": "light",
                        "price_as_of": "2026-12-01",
                        "colour": "red",
                    },
                    {
                        "name": "claude-new-2",
                        "tier": "light",
                        "price_as_of": "2026-12-01",
                        "prices_per_mtok": {"input": -1, "output": 5},
                    },
                    {"name": "claude-new-3", "tier": "light"},
                ]
            }
        )
    )
    result = _ember("models", "load", str(bad), db=db)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 3, lines
    assert "models[0] (claude-new-1): colour: Extra inputs are not permitted" in lines[0]
    assert (
        "models[1] (claude-new-2): prices_per_mtok.input: "
        "Input should be greater than or equal to 0" in lines[1]
    )
    assert "models[2] (claude-new-3): price_as_of: the price snapshot has no date" in lines[2]
    with psycopg.connect(db) as conn:
        count = conn.execute(
            "SELECT count(*) FROM ember.models WHERE id LIKE 'claude-new-%'"
        ).fetchone()
    assert count == (0,)


def test_models_load_adds_and_reprices_and_list_shows_it(db: str, tmp_path: Path) -> None:
    good = tmp_path / "models.json"
    good.write_text(
        json.dumps(
            {
                "price_as_of": "2026-12-02",
                "models": [
                    {
                        "name": "claude-opus-5-5",
                        "tier": "frontier",
                        "cache_ttl": "5m",
                        "observed_min_cacheable_tokens": 1024,
                        "preserved_thinking": True,
                        "adaptive_thinking_only": True,
                        "prices_per_mtok": {
                            "input": 4,
                            "output": 20,
                            "cache_write_5m": 5,
                            "cache_write_1h": 8,
                            "cache_read": 0.2,
                        },
                    },
                ],
            }
        )
    )
    result = _ember("models", "load", str(good), db=db)
    assert result.returncode == 0, result.stderr
    assert "1 model(s) stored" in result.stdout
    listed = _ember("models", "list", "--json", db=db)
    assert listed.returncode == 0, listed.stderr
    rows = {r["model"]: r for r in json.loads(listed.stdout)}
    opus = rows["claude-opus-5-5"]
    assert (opus["price_as_of"], opus["hot_min"], opus["read"]) == ("2026-12-02", 1024, 0.2)
    assert rows["claude-sonnet-4-6"]["hot_min"] == 2048
    table = _ember("models", "list", db=db)
    assert "claude-haiku-5-5" in table.stdout and ">100000: 0.5/2.5" in table.stdout
