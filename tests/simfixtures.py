"""Shared helpers for the simulator tests: a tiny model table, request builders, fixtures.

The fixtures ``sim_clock``, ``shared_sim``, ``sim``, ``shared_client`` and ``sim_client`` are
registered for every test module by ``pytest_plugins`` in conftest.py.

The tiny table keeps payloads small (a minimum cacheable length of 32 estimated
tokens is 128 characters) and uses names the SDK does not warn about.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from ember.sim import ManualClock, SimServer
from ember.tokens import estimate_tokens

MIN = 32
STANDARD = "sim-standard"  # keeps all thinking
LAST_TURN = "sim-last-turn"  # keeps only the last assistant turn's thinking
OTHER = "sim-other"

PRICES = {"input": 3, "output": 15, "cache_write_5m": 3.75, "cache_write_1h": 6, "cache_read": 0.3}
TINY_MODELS: dict[str, Any] = {
    "price_as_of": "2026-11-30",
    "models": [
        {
            "name": name,
            "tier": "standard",
            "min_cacheable_tokens": MIN,
            "thinking_retention": retention,
            "prices_per_mtok": PRICES,
        }
        for name, retention in ((STANDARD, "all"), (LAST_TURN, "last-turn"), (OTHER, "all"))
    ],
}

CC = {"type": "ephemeral"}
CC_1H = {"type": "ephemeral", "ttl": "1h"}


def words(tag: str, tokens: int) -> str:
    """A text of exactly ``tokens`` estimated tokens (4 characters each), unique per tag."""
    unit = tag + " lorem ipsum dolor sit amet "
    return (unit * (tokens * 4 // len(unit) + 1))[: tokens * 4]


def text(value: str, marker: dict[str, Any] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": value}
    if marker is not None:
        block["cache_control"] = marker
    return block


def conversation(n: int, tokens: int = 40) -> list[dict[str, Any]]:
    """``n`` alternating messages (user first), one text block each, ``tokens`` each."""
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": [text(words(f"m{i}", tokens))]} for i in range(n)]


def usage_of(message: Any) -> tuple[int, int, int, int, int]:
    """(read, write 5m, write 1h, uncached, total) from an SDK message."""
    u = message.usage
    read = u.cache_read_input_tokens or 0
    w5 = u.cache_creation.ephemeral_5m_input_tokens if u.cache_creation else 0
    w1 = u.cache_creation.ephemeral_1h_input_tokens if u.cache_creation else 0
    assert (u.cache_creation_input_tokens or 0) == w5 + w1
    return read, w5, w1, u.input_tokens, read + w5 + w1 + u.input_tokens


def tokens_of(*texts: str) -> int:
    return sum(estimate_tokens(t) for t in texts)


def raw_post(
    base_url: str,
    path: str,
    data: bytes | None,
    headers: dict[str, str] | None = None,
    method: str = "POST",
) -> tuple[int, Any]:
    """A request outside the SDK; returns (status, parsed JSON body)."""
    default = {
        "x-api-key": "test",
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
    }
    sent = {**default, **(headers or {})}
    sent = {k: v for k, v in sent.items() if v}
    req = urllib.request.Request(base_url + path, data=data, headers=sent, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.fixture(name="sim_clock")
def _sim_clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(name="shared_sim", scope="module")
def _shared_sim() -> Iterator[SimServer]:
    # One server per module: starting and stopping uvicorn costs more than most tests.
    with SimServer(responder="echo", models=TINY_MODELS) as server:
        yield server


@pytest.fixture(name="sim")
def _sim(shared_sim: SimServer, sim_clock: ManualClock) -> SimServer:
    """The module's server with an empty cache and log, the echo responder and a manual clock."""
    shared_sim.reset(responder="echo", clock=sim_clock, models=TINY_MODELS)
    return shared_sim


@pytest.fixture(name="shared_client", scope="module")
def _shared_client(shared_sim: SimServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=shared_sim.base_url, api_key="test", max_retries=0) as c:
        yield c


@pytest.fixture(name="sim_client")
def _sim_client(sim: SimServer, shared_client: anthropic.Anthropic) -> anthropic.Anthropic:
    """An SDK client (no retries) for the freshly reset ``sim``."""
    return shared_client
