"""The model registry file: the one format `ember models load` takes and the simulator reads.

A file is a JSON object ``{"price_as_of": "YYYY-MM-DD", "models": [entry, ...]}``; each entry
names one model with its tier, cache rules, thinking behaviour and a dated price snapshot
(docs/models.md). What the provider's documentation does not state is left out or null, never
guessed: SQL treats an unknown cache rule as cold and a missing price as an unknown cost.

Checking here reports every problem of a file, one line each, before anything is stored; the
SQL procedure (`ember.load_models`) checks again for any other caller.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

PRICE_KINDS = ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")
TOP_LEVEL_KEYS = ("price_as_of", "source", "models")

Price = float | None


class Prices(BaseModel):
    """List prices in USD per million tokens; a price left out is unknown."""

    model_config = ConfigDict(extra="forbid")

    input: Price = Field(default=None, ge=0)
    output: Price = Field(default=None, ge=0)
    cache_write_5m: Price = Field(default=None, ge=0)
    cache_write_1h: Price = Field(default=None, ge=0)
    cache_read: Price = Field(default=None, ge=0)


class LengthTier(BaseModel):
    """Prices for every token of a request whose prompt is longer than ``above_tokens``."""

    model_config = ConfigDict(extra="forbid")

    above_tokens: int = Field(gt=0)
    prices_per_mtok: Prices


class ModelEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    tier: Literal["light", "standard", "frontier"]
    position: int | None = None
    tags: list[str] = Field(default_factory=list)
    # The TTL the hot path counts on; null when the documentation states none.
    cache_ttl: Literal["5m", "1h"] | None = None
    # Documented, and observed where users see another: the hot path uses the larger.
    min_cacheable_tokens: int | None = Field(default=None, gt=0)
    observed_min_cacheable_tokens: int | None = Field(default=None, gt=0)
    thinking_retention: Literal["all", "last-turn"] = "all"
    thinking_before_system: bool = False
    adaptive_thinking_only: bool = False
    # Thinking blocks bound to the model and to the exact prefix that produced them.
    preserved_thinking: bool = False
    reads_thinking_from: list[str] = Field(default_factory=list)
    snapshots: list[str] = Field(default_factory=list)
    price_as_of: date
    prices_per_mtok: Prices = Field(default_factory=Prices)
    length_tiers: list[LengthTier] = Field(default_factory=list)
    source: str | None = None

    def sql_entry(self) -> dict[str, Any]:
        """The entry as `ember.load_models` takes it (JSON, dates as text)."""
        return self.model_dump(mode="json", exclude={"snapshots"})


class RegistryFileError(Exception):
    """A registry file that cannot be loaded; ``problems`` holds one line per problem."""

    def __init__(self, where: str, problems: list[str]) -> None:
        super().__init__(f"{where}: {len(problems)} problem(s)")
        self.where = where
        self.problems = problems


@dataclass(frozen=True)
class RegistryFile:
    entries: list[ModelEntry]


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse_registry(data: Any, where: str = "registry") -> RegistryFile:
    """Every entry of ``data`` checked; all problems are raised together, one line each."""
    if not isinstance(data, dict):
        raise RegistryFileError(where, [f"{where}: the file must hold a JSON object"])
    problems = [
        f"{where}: unknown top-level key {key!r} (allowed: {', '.join(TOP_LEVEL_KEYS)})"
        for key in data
        if key not in TOP_LEVEL_KEYS
    ]
    default_date = data.get("price_as_of")
    raw_models = data.get("models")
    if not isinstance(raw_models, list):
        problems.append(f"{where}: models must be a list of model entries")
        raise RegistryFileError(where, problems)
    entries: list[ModelEntry] = []
    for index, raw in enumerate(raw_models):
        name = raw.get("name") if isinstance(raw, dict) else None
        label = f"{where}: models[{index}]" + (f" ({name})" if isinstance(name, str) else "")
        if not isinstance(raw, dict):
            problems.append(f"{label}: must be an object")
            continue
        if "price_as_of" not in raw:
            if default_date is None:
                problems.append(
                    f"{label}: price_as_of: the price snapshot has no date "
                    "(set price_as_of on the model or at the top of the file)"
                )
                continue
            raw = {**raw, "price_as_of": default_date}
        try:
            entries.append(ModelEntry.model_validate(raw))
        except ValidationError as exc:
            for err in exc.errors():
                problems.append(f"{label}: {_loc(err['loc'])}: {err['msg']}")
    names = [e.name for e in entries]
    problems += [
        f"{where}: model {n!r} is named more than once"
        for n in sorted(set(names))
        if names.count(n) > 1
    ]
    if problems:
        raise RegistryFileError(where, problems)
    return RegistryFile(entries)


def read_registry(path: str | Path) -> RegistryFile:
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RegistryFileError(str(path), [f"{path}: not JSON: {exc}"]) from exc
    return parse_registry(data, str(path))
