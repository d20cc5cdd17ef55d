"""The simulator's model table, read from configuration (``models.json`` by default).

Per-model numbers drift between model generations, so none of them live in code.
The SQL model registry is seeded with the same values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

ThinkingRetention = Literal["last-turn", "all"]

PRICE_KINDS = ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")


@dataclass(frozen=True)
class ModelInfo:
    name: str
    tier: str
    min_cacheable_tokens: int
    thinking_retention: ThinkingRetention
    prices_per_mtok: dict[str, float]
    # The model renders its thinking configuration before the system prompt: a thinking
    # or effort change invalidates tools and system too, not only messages.
    thinking_before_system: bool = False
    # The model refuses thinking.type "enabled" (a fixed budget); only adaptive is taken.
    adaptive_thinking_only: bool = False
    # Dated snapshot names that resolve to this model; any other dated name is a 404.
    snapshots: tuple[str, ...] = field(default=())
    # A minimum users observe that differs from the documented one (which is what the
    # simulator applies); prefixes between the two are flagged near_minimum.
    reported_min_cacheable_tokens: int | None = None

    def list_price_usd(self, usage: dict[str, Any]) -> float:
        """A list-price estimate of one request's cost (not a bill)."""
        creation = usage.get("cache_creation") or {}
        amounts: dict[str, int] = {
            "input": usage.get("input_tokens", 0),
            "output": usage.get("output_tokens", 0),
            "cache_write_5m": creation.get("ephemeral_5m_input_tokens", 0),
            "cache_write_1h": creation.get("ephemeral_1h_input_tokens", 0),
            "cache_read": usage.get("cache_read_input_tokens", 0),
        }
        total = sum(amounts[k] * self.prices_per_mtok.get(k, 0.0) for k in PRICE_KINDS)
        return round(total / 1_000_000, 8)


@dataclass(frozen=True)
class ModelTable:
    price_as_of: str
    models: dict[str, ModelInfo]

    def lookup(self, name: str) -> ModelInfo | None:
        """The model an alias or one of its listed snapshot names means; None otherwise.

        A made-up snapshot ("claude-opus-4-8-20991231") is not found, as the API answers
        it with a 404, rather than falling back to the alias.
        """
        if name in self.models:
            return self.models[name]
        return next((m for m in self.models.values() if name in m.snapshots), None)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelTable:
        models: dict[str, ModelInfo] = {}
        for row in data["models"]:
            retention = row.get("thinking_retention", "all")
            if retention not in ("last-turn", "all"):
                raise ValueError(f"model {row['name']}: unknown thinking_retention {retention!r}")
            prices = {k: float(v) for k, v in row.get("prices_per_mtok", {}).items()}
            models[row["name"]] = ModelInfo(
                name=row["name"],
                tier=row.get("tier", "standard"),
                min_cacheable_tokens=int(row["min_cacheable_tokens"]),
                thinking_retention=retention,
                prices_per_mtok=prices,
                thinking_before_system=bool(row.get("thinking_before_system", False)),
                adaptive_thinking_only=bool(row.get("adaptive_thinking_only", False)),
                snapshots=tuple(str(s) for s in row.get("snapshots", ())),
                reported_min_cacheable_tokens=row.get("reported_min_cacheable_tokens"),
            )
        return cls(price_as_of=str(data.get("price_as_of", "")), models=models)


def load_models(path: str | Path | None = None) -> ModelTable:
    """The table at ``path``, or the packaged ``models.json``."""
    if path is None:
        text = resources.files("ember.sim").joinpath("models.json").read_text(encoding="utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    return ModelTable.from_dict(json.loads(text))
