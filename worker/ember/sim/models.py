"""The simulator's model table, read from configuration (``models.json`` by default).

Per-model numbers drift between model generations, so none of them live in code. The file is
the registry format `ember models load` takes; the SQL registry is seeded with the same values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from ..registry import PRICE_KINDS, RegistryFileError, parse_registry

ThinkingRetention = Literal["last-turn", "all"]


@dataclass(frozen=True)
class ModelInfo:
    name: str
    tier: str
    # The documented minimum cacheable length; None when the documentation states none.
    min_cacheable_tokens: int | None
    thinking_retention: ThinkingRetention
    prices_per_mtok: dict[str, float | None]
    # The model renders its thinking configuration before the system prompt: a thinking
    # or effort change invalidates tools and system too, not only messages.
    thinking_before_system: bool = False
    # The model refuses thinking.type "enabled" (a fixed budget); only adaptive is taken.
    adaptive_thinking_only: bool = False
    # Dated snapshot names that resolve to this model; any other dated name is a 404.
    snapshots: tuple[str, ...] = field(default=())
    # A minimum users observe the API to apply where it differs from the documented one.
    observed_min_cacheable_tokens: int | None = None
    # Thinking blocks are bound to this model and to the prefix that produced them
    # (preserved thinking); reads_thinking_from names the other models whose blocks it reads.
    preserved_thinking: bool = False
    reads_thinking_from: tuple[str, ...] = field(default=())
    # (above_tokens, prices): a prompt longer than above_tokens pays those prices throughout.
    length_tiers: tuple[tuple[int, dict[str, float | None]], ...] = field(default=())

    @property
    def cache_minimum(self) -> int | None:
        """The length below which nothing is cached: the larger of documented and observed,
        or None when neither is known (the simulator then caches nothing, as it cannot say)."""
        known = [m for m in (self.min_cacheable_tokens, self.observed_min_cacheable_tokens) if m]
        return max(known) if known else None

    def list_price_usd(self, usage: dict[str, Any]) -> float | None:
        """A list-price estimate of one request's cost (not a bill); None if a price is unknown."""
        creation = usage.get("cache_creation") or {}
        amounts: dict[str, int] = {
            "input": usage.get("input_tokens", 0),
            "output": usage.get("output_tokens", 0),
            "cache_write_5m": creation.get("ephemeral_5m_input_tokens", 0),
            "cache_write_1h": creation.get("ephemeral_1h_input_tokens", 0),
            "cache_read": usage.get("cache_read_input_tokens", 0),
        }
        prompt = sum(v for k, v in amounts.items() if k != "output")
        prices = self.prices_per_mtok
        for above, tier_prices in sorted(self.length_tiers, reverse=True):
            if prompt > above:
                prices = tier_prices
                break
        total = 0.0
        for kind in PRICE_KINDS:
            price = prices.get(kind)
            if price is None:
                if amounts[kind]:
                    return None
                continue
            total += amounts[kind] * price
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
        """A table from a registry file's contents (the format `ember models load` takes)."""
        try:
            registry = parse_registry(data, "model table")
        except RegistryFileError as exc:
            raise ValueError("; ".join(exc.problems)) from None
        models: dict[str, ModelInfo] = {}
        for e in registry.entries:
            models[e.name] = ModelInfo(
                name=e.name,
                tier=e.tier,
                min_cacheable_tokens=e.min_cacheable_tokens,
                thinking_retention=e.thinking_retention,
                prices_per_mtok=e.prices_per_mtok.model_dump(),
                thinking_before_system=e.thinking_before_system,
                adaptive_thinking_only=e.adaptive_thinking_only,
                snapshots=tuple(e.snapshots),
                observed_min_cacheable_tokens=e.observed_min_cacheable_tokens,
                preserved_thinking=e.preserved_thinking,
                reads_thinking_from=tuple(e.reads_thinking_from),
                length_tiers=tuple(
                    (t.above_tokens, t.prices_per_mtok.model_dump()) for t in e.length_tiers
                ),
            )
        return cls(price_as_of=str(data.get("price_as_of", "")), models=models)


def load_models(path: str | Path | None = None) -> ModelTable:
    """The table at ``path``, or the packaged ``models.json``."""
    if path is None:
        text = resources.files("ember.sim").joinpath("models.json").read_text(encoding="utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    return ModelTable.from_dict(json.loads(text))
