"""`ember models list` and `ember models load FILE`: the model registry as data.

An operator adds or re-prices a model without a migration: the file (docs/models.md) is checked
whole first, every problem printed on its own line and nothing stored; a good file goes to
`ember.load_models` in one transaction. Finished runs keep the price snapshot they copied.
"""

from __future__ import annotations

import argparse
import json
import sys
from decimal import Decimal
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ember import queries, sqlstates
from ember.registry import RegistryFileError, read_registry

EXIT_USAGE = 2
EXIT_REFUSED = 9

COLUMNS = (
    "model",
    "tier",
    "cache_ttl",
    "min_documented",
    "min_observed",
    "hot_min",
    "thinking",
    "preserved_thinking",
    "price_as_of",
    "input",
    "output",
    "write_5m",
    "write_1h",
    "read",
    "length_tiers",
    "source",
)


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    return value


def _cell(value: Any) -> str:
    if value is None:
        return "?"
    if isinstance(value, Decimal):
        return format(value.normalize(), "f")
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return (
            ", ".join(
                f">{t['above_tokens']}: {t['price_input']}/{t['price_output']}" for t in value
            )
            or "-"
        )
    return str(value)


def list_models(url: str, as_json: bool) -> int:
    with psycopg.connect(url) as conn:
        rows = conn.execute(queries.LIST_MODELS).fetchall()
    if as_json:
        print(json.dumps([dict(zip(COLUMNS, map(_plain, r), strict=True)) for r in rows], indent=2))
        return 0
    shown = COLUMNS[:-1]  # the source URLs are in --json
    table = [list(shown)] + [[_cell(v) for v in r[: len(shown)]] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(shown))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    print(
        "? = unknown: a model with an unknown TTL or minimum is never hot;"
        " a missing price makes a cost NULL"
    )
    return 0


def load_models(url: str, path: str) -> int:
    try:
        registry = read_registry(path)
    except RegistryFileError as exc:
        for line in exc.problems:
            print(f"ember models load: {line}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"ember models load: {path}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    entries = [e.sql_entry() for e in registry.entries]
    try:
        with psycopg.connect(url) as conn:
            stored = conn.execute(queries.LOAD_MODELS, (Jsonb(entries),)).fetchone()
    except psycopg.Error as exc:
        if exc.sqlstate == sqlstates.INVALID_MODEL_ENTRY:
            print(f"ember models load: {path}: {exc.diag.message_primary}", file=sys.stderr)
            return EXIT_REFUSED
        raise
    print(f"{path}: {stored[0] if stored else 0} model(s) stored")
    return 0


def run(args: argparse.Namespace, url: str) -> int:
    if args.action == "list":
        return list_models(url, args.json)
    if not args.file:
        print("ember models load: name the registry file to load", file=sys.stderr)
        return EXIT_USAGE
    return load_models(url, args.file)
