"""A whole host loop against `ember sim`, with `ember worker` running beside it as a sidecar.

    .venv/bin/python examples/host.py

What it shows, in order:
0. the one-time set-up (`Host.setup`), which says what it did;
1. a host that offers the shadow tool in every turn and captures each request's exact bytes
   (`ember.host.PrefixCapture`, which also puts the cache breakpoint on the last message),
   recording them with `note_prefix`;
2. a turn that ends waiting for the user: the worker replays it on the hot path (a cache read
   of the whole old prefix) and proposes facts with evidence;
3. a turn that leaves a tool call dangling, then waits for the user: the worker's shadow turn
   answers the call with a placeholder; the user speaks while that shadow turn is running, and
   the worker aborts it (cancelled, interrupted-by-user, no proposals);
4. the worker's runs, proposals and list-price cost, read back from SQL.

The database is DATABASE_URL, else the embedded development server; the example recreates a
database named `ember_example` on it. No request leaves this machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import psycopg

from ember.config import database_url
from ember.devsetup import fresh_database
from ember.host import Host, PrefixCapture, tool_call_refusal, turn_tools
from ember.sim import Hang, Reply, SimServer
from ember.sim.responders import Heuristic, SimRequest

ROOT = Path(__file__).resolve().parents[1]
MODEL = "claude-sonnet-4-6"
SYSTEM = (
    "You are the travel and operations assistant of a small team. Keep answers short. "
    "Ask before anything irreversible. Work through the tools you are given. "
) * 40  # long enough to be cached (the model's minimum cacheable length is 1,024 tokens)
TOOLS = turn_tools(
    [
        {
            "name": "deploy",
            "description": "deploy a service",
            "input_schema": {"type": "object", "properties": {"service": {"type": "string"}}},
        }
    ]
)


class HostTurns:
    """The simulator's answers to the host's own turns (selected by a request header)."""

    name = "host-turns"

    async def respond(self, request: SimRequest) -> Any:
        last = request.body["messages"][-1]["content"]
        text = last if isinstance(last, str) else " ".join(b.get("text", "") for b in last)
        if "deploy" in text.lower():
            return Reply.tool_use("deploy", {"service": "billing"}, text="Deploying billing now.")
        return Reply.text("Window seat it is. Shall I book the 9:05 to Porto?")


class ShadowTurns:
    """Answers the worker: the heuristic reader, except that the shadow turn of the deploy
    thread hangs, so that a human message can cancel it mid-call."""

    name = "shadow-turns"

    def __init__(self) -> None:
        self.heuristic = Heuristic()

    async def respond(self, request: SimRequest) -> Any:
        if any("Deploying billing now." in t for t in request.texts()):
            return Hang()
        return await self.heuristic.respond(request)


def turn(
    host: Host, client: anthropic.Anthropic, capture: PrefixCapture, thread: str, said: str
) -> None:
    """One host turn: the human's message, one model call, the answer, the recorded prefix."""
    host.append_message(thread, "user", said, author="human")
    host.turn_started(thread)
    message = client.messages.create(
        model=MODEL,
        max_tokens=1024,
        system=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        tools=TOOLS,  # type: ignore[arg-type]
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": said, "cache_control": {"type": "ephemeral"}}],
            }
        ],
        extra_headers={"x-ember-sim-responder": "host-turns"},
    )
    host.append_message(
        thread,
        "assistant",
        "".join(b.text for b in message.content if b.type == "text"),
        blocks=[b.model_dump(mode="json") for b in message.content],
    )
    host.note_prefix(thread, capture.take())
    for block in message.content:
        if block.type == "tool_use":
            refusal = tool_call_refusal(block.name, shadow_turn=False)
            print(f"  [{thread}] tool call {block.name}: {refusal or 'started, still running'}")
    host.turn_ended(thread, True)
    host.waiting_for_user(thread)  # the answer asks the user something: hot shadow work now


def wait_for(conn: psycopg.Connection[Any], sql: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not conn.execute(sql).fetchone()[0]:  # type: ignore[index]
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for: {sql}")
        time.sleep(0.1)


def main() -> int:
    url, _ = fresh_database(database_url(), "ember_example", root=ROOT, pgtap=False)
    sim = SimServer(responder=ShadowTurns(), named={"host-turns": HostTurns()})
    with sim, psycopg.connect(url, autocommit=True) as conn:
        host = Host(conn)
        # The one-time calls: main first (the steward's thread copies its model pin once), the
        # steward's thread, shadow's activation. A second call would change nothing.
        for step in host.setup(main="main", main_model=MODEL):
            print(f"setup: {step}")
        host.create_thread("trip", "side", title="Porto trip", model=MODEL)
        host.create_thread("ops", "side", title="Deploys", model=MODEL)

        env = {**os.environ, "DATABASE_URL": url, "ANTHROPIC_BASE_URL": sim.base_url}
        env.setdefault("ANTHROPIC_API_KEY", "example-key")
        worker = subprocess.Popen(
            [str(Path(sys.executable).parent / "ember"), "worker", "--log-format", "text"],
            env=env,
        )
        try:
            capture = PrefixCapture()
            client = anthropic.Anthropic(
                base_url=sim.base_url,
                api_key="example-key",
                max_retries=0,
                http_client=capture.http_client(),
            )
            print("turn in 'trip' (ends waiting for the user):")
            turn(host, client, capture, "trip", "I always prefer window seats. Find me a train.")
            wait_for(
                conn,
                "SELECT count(*) > 0 FROM ember.shadow_runs"
                " WHERE thread_id = 'trip' AND status <> 'running'",
            )

            print("turn in 'ops' (a tool call left running, then waiting for the user):")
            turn(host, client, capture, "ops", "Please deploy billing.")
            wait_for(
                conn,
                "SELECT count(*) > 0 FROM ember.shadow_runs"
                " WHERE thread_id = 'ops' AND status = 'running'",
            )
            print("  the user speaks while the shadow turn of 'ops' is running")
            host.append_message("ops", "user", "Stop, deploy tomorrow instead.", author="human")
            wait_for(
                conn,
                "SELECT count(*) > 0 FROM ember.shadow_runs"
                " WHERE thread_id = 'ops' AND status <> 'running'",
            )
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(30)

        print("\nruns:")
        for row in conn.execute(
            "SELECT r.thread_id, r.path, r.status, r.error, r.cache_read_tokens,"
            " r.input_tokens, c.cost_usd FROM ember.shadow_runs AS r"
            " JOIN ember.shadow_run_cost AS c ON c.run_id = r.id ORDER BY r.id"
        ):
            thread, path, status, error, read, uncached, cost = row
            print(
                f"  {thread}: {path} {status}{' (' + error + ')' if error else ''},"
                f" cache read {read} tokens, uncached {uncached}, ${cost:.6f}"
            )
        print("proposals:")
        for thread, text, kind, evidence, error in conn.execute(
            "SELECT thread_id, text, evidence_kind, evidence, validation_error"
            " FROM ember.shadow_proposals ORDER BY id"
        ):
            print(f"  {thread}: {text} [{kind} {evidence}]{' rejected: ' + error if error else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
