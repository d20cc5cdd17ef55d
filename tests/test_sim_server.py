"""Running the simulator: the `ember sim` entry point, the JSONL log, the model table, clocks."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import anthropic
import pytest

from ember.sim import RequestLog, SimServer, load_models
from ember.sim.server import main
from simfixtures import STANDARD, TINY_MODELS, conversation

SECRET = "sk-test-must-never-be-logged"


def test_the_packaged_model_table_holds_the_agreed_values() -> None:
    table = load_models()
    assert table.price_as_of == "2026-12-01"
    rows = {
        name: (
            m.tier,
            m.min_cacheable_tokens,
            m.thinking_retention,
            tuple(
                m.prices_per_mtok[k]
                for k in ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")
            ),
        )
        for name, m in table.models.items()
    }
    assert rows == {
        "claude-haiku-4-5": ("light", 4096, "last-turn", (1, 5, 1.25, 2, 0.10)),
        "claude-sonnet-4-5": ("standard", 1024, "last-turn", (3, 15, 3.75, 6, 0.30)),
        "claude-sonnet-4-6": ("standard", 1024, "all", (3, 15, 3.75, 6, 0.30)),
        "claude-opus-4-1": ("frontier", 1024, "last-turn", (15, 75, 18.75, 30, 1.50)),
        "claude-opus-4-5": ("frontier", 4096, "all", (5, 25, 6.25, 10, 0.50)),
        "claude-opus-4-6": ("frontier", 4096, "all", (5, 25, 6.25, 10, 0.50)),
        "claude-opus-4-7": ("frontier", 2048, "all", (5, 25, 6.25, 10, 0.50)),
        "claude-opus-4-8": ("frontier", 1024, "all", (5, 25, 6.25, 10, 0.50)),
        # Reads at 0.1x, 0.05x and 0.025x of input; no documented minimum for the 5.x models.
        "claude-haiku-5-5": ("light", None, "all", (0.1, 0.5, 0.125, 0.2, 0.01)),
        "claude-sonnet-5-5": ("standard", None, "all", (2, 10, 2.5, 4, 0.1)),
        "claude-opus-5-5": ("frontier", None, "all", (4, 20, 5, 8, 0.2)),
        "claude-fable-5-1": ("frontier", None, "all", (10, 50, 12.5, 20, 0.25)),
        "claude-mythos-5-1": ("frontier", None, "all", (10, 50, 12.5, 20, 0.25)),
    }
    assert table.models["claude-sonnet-4-6"].cache_minimum == 2048  # observed, above the page
    assert table.models["claude-haiku-5-5"].length_tiers == (
        (
            100000,
            {
                "input": 0.5,
                "output": 2.5,
                "cache_write_5m": 0.625,
                "cache_write_1h": 1.0,
                "cache_read": 0.05,
            },
        ),
    )
    assert {n for n, m in table.models.items() if m.preserved_thinking} == {
        "claude-haiku-5-5",
        "claude-sonnet-5-5",
        "claude-opus-5-5",
        "claude-fable-5-1",
        "claude-mythos-5-1",
    }
    # A listed snapshot name resolves to its alias; a made-up one is not a model.
    assert table.lookup("claude-sonnet-4-5-20250929") is table.models["claude-sonnet-4-5"]
    assert table.lookup("claude-opus-4-8-20261101") is None
    assert table.lookup("claude-sonnet-4-5-20991231") is None


def test_the_request_log_keeps_bodies_usage_and_cost_and_writes_jsonl(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    raw = json.dumps({"model": STANDARD, "max_tokens": 5, "messages": conversation(1)}, indent=1)
    with (
        SimServer(responder="echo", models=TINY_MODELS, log_path=log) as sim,
        anthropic.Anthropic(base_url=sim.base_url, api_key=SECRET, max_retries=0) as client,
    ):
        client.post("/v1/messages", content=raw.encode(), cast_to=anthropic.types.Message)
        with pytest.raises(anthropic.NotFoundError):
            client.messages.create(model="unknown", max_tokens=5, messages=conversation(1))
        entries = sim.requests

    assert [e.status for e in entries] == [200, 404]
    assert entries[0].raw == raw.encode() and entries[0].text == raw
    assert entries[0].body == json.loads(raw)
    assert entries[0].usage is not None and entries[0].usage["input_tokens"] == 40
    assert entries[0].cost_usd == round((40 * 3 + entries[0].usage["output_tokens"] * 15) / 1e6, 8)
    assert entries[0].headers["anthropic-version"]
    assert entries[1].error == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "model: unknown"},
    }

    text = log.read_text(encoding="utf-8")
    assert SECRET not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert [line["status"] for line in lines] == [200, 404]
    assert lines[0]["body_text"] == raw
    assert lines[0]["usage"] == entries[0].usage
    assert lines[0]["cache"]["total_input_tokens"] == 40


def test_the_clock_may_return_aware_datetimes() -> None:
    def clock() -> datetime:
        return datetime(2026, 12, 1, 9, 30, tzinfo=UTC)

    with (
        SimServer(responder="echo", models=TINY_MODELS, clock=clock) as sim,
        anthropic.Anthropic(base_url=sim.base_url, api_key="test") as client,
    ):
        client.messages.create(model=STANDARD, max_tokens=5, messages=conversation(1))
        assert sim.requests[0].received_at == clock().timestamp()


def test_an_unknown_responder_name_is_a_usage_error() -> None:
    assert main(["--responder", "oracle"]) == 2


def test_ember_sim_serves_until_interrupted(tmp_path: Path) -> None:
    models = tmp_path / "models.json"
    models.write_text(json.dumps(TINY_MODELS), encoding="utf-8")
    log = tmp_path / "log.jsonl"
    code = "import sys; from ember.sim.server import main; sys.exit(main(sys.argv[1:]))"
    args = ["--port", "0", "--responder", "echo", "--log", str(log), "--models", str(models)]
    process = subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("ember sim listening on http://127.0.0.1:")
        url = first.split()[-1]
        with anthropic.Anthropic(base_url=url, api_key="test", max_retries=0) as client:
            reply = client.messages.create(model=STANDARD, max_tokens=5, messages=conversation(1))
        assert reply.usage.input_tokens == 40
    finally:
        process.send_signal(2)  # SIGINT, as Ctrl-C
        process.wait(15)
    assert process.returncode == 0
    [line] = log.read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["usage"]["input_tokens"] == 40


def test_the_in_memory_log_can_be_bounded() -> None:
    log = RequestLog(keep=2)
    for n in range(3):
        log.start("POST", "/v1/messages", float(n), b"{}", {})
    assert [e.seq for e in log.entries()] == [2, 3]
