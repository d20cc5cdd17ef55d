"""`ember sim --responder host`: a host's turns get text and never the shadow tool, Ember's own
requests get the rule-based answer; and the simulator's one documented default port."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest

from ember.host import turn_tools
from ember.sim import SimServer
from ember.sim.responders import SHADOW_TURN_MARK
from ember.tools import SHADOW_TOOL_NAME
from ember.worker.shadow import build_hot_request, cold_request
from workerkit import EMBER

ROOT = Path(__file__).resolve().parents[1]
MODEL = "claude-sonnet-4-6"


@pytest.fixture(scope="module")
def host_sim() -> Iterator[SimServer]:
    with SimServer(responder="host") as server:
        yield server


def test_the_shadow_turn_mark_is_how_the_shadow_question_begins() -> None:
    question = (ROOT / "prompts" / "shadow_question.md").read_text(encoding="utf-8")
    assert question.startswith(SHADOW_TURN_MARK)


def test_a_host_turn_gets_text_and_a_shadow_turn_gets_the_shadow_tool(host_sim: SimServer) -> None:
    client = anthropic.Anthropic(base_url=host_sim.base_url, api_key="k", max_retries=0)
    said = "I always prefer window seats. Remember that."
    reply = client.messages.create(
        model=MODEL,
        max_tokens=256,
        tools=turn_tools([]),  # type: ignore[arg-type]
        messages=[{"role": "user", "content": f"m:1 user(human): {said}"}],
    )
    assert [b.type for b in reply.content] == ["text"], "a normal turn never calls a tool"
    assert reply.content[0].text.startswith("Noted: ")  # type: ignore[union-attr]

    request = host_sim.requests[-1].raw.decode()
    answer = json.dumps({"content": [b.model_dump(mode="json") for b in reply.content]})
    hot = build_hot_request(request, answer, [f"m:1 user(human): {said}"], last_turn_thinking=False)
    shadow = client.post("/v1/messages", body=json.loads(hot.body), cast_to=anthropic.types.Message)
    assert [b.type for b in shadow.content] == ["tool_use"]
    call = shadow.content[0]
    assert call.name == SHADOW_TOOL_NAME  # type: ignore[union-attr]
    assert call.input["facts"][0]["evidence"] == [{"message_id": 1}]  # type: ignore[union-attr,index]

    cold = client.post(
        "/v1/messages",
        body=cold_request("claude-haiku-4-5", [f"m:1 user(human): {said}"]),
        cast_to=anthropic.types.Message,
    )
    assert cold.content[0].type == "tool_use" and cold.content[0].name == SHADOW_TOOL_NAME


def test_ember_sim_listens_on_8787_by_default_and_says_so_when_it_cannot() -> None:
    help_text = subprocess.run([EMBER, "sim", "--help"], capture_output=True, text=True).stdout
    assert "default 8787" in help_text
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = subprocess.run(
            [EMBER, "sim", "--port", str(port)], capture_output=True, text=True, timeout=60
        )
    assert out.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr and "--port 0" in out.stderr
