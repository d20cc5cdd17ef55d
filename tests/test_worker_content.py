"""Content the database cannot store, in a model's answer: a lone surrogate is cleaned like NUL
where the answer enters the worker, and any other content error at the submit ends the run
failed with the reason, instead of leaving it running until its lease lapses and the model is
called again."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psycopg

from ember.tools import SHADOW_TOOL_NAME
from ember.worker.shadow import ShadowPipeline
from reliability import record
from workerkit import InProcessContext, as_role, offer_cold, prepare, proposals, runs


def _message(tool_input_json: str) -> bytes:
    """A Messages API answer whose one tool call's input is given as raw JSON text."""
    head = json.dumps(
        {
            "id": "msg_raw01",
            "type": "message",
            "role": "assistant",
            "model": "claude-haiku-4-5",
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    )
    block = (
        f'{{"type":"tool_use","id":"toolu_raw01","name":"{SHADOW_TOOL_NAME}",'
        f'"input":{tool_input_json}}}'
    )
    return (head[:-1] + f',"content":[{block}]}}').encode()


class RawServer:
    """Answers every POST with fixed bytes: JSON the simulator would never write (it encodes
    what it sends as UTF-8, and a lone surrogate has no UTF-8 form)."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.posts = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                outer.posts += 1
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> RawServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _run_once(url: str, base_url: str) -> None:
    async def go() -> None:
        pipeline = ShadowPipeline()
        async with await psycopg.AsyncConnection.connect(as_role(url), autocommit=True) as conn:
            job = await pipeline.claim(conn, "test", timedelta(minutes=5))
        assert job is not None
        ctx = InProcessContext(url, base_url)
        try:
            await pipeline.execute(job, ctx)
        finally:
            await ctx.client.close()

    asyncio.run(asyncio.wait_for(go(), 60))


def test_a_lone_surrogate_in_a_proposal_is_cleaned_and_the_run_completes(db: str) -> None:
    prepare(db, ["t1"])
    mid = offer_cold(db, "t1", "I prefer tea.")
    fact = (
        '{"facts":[{"text":"The user prefers tea \\ud800 and \\udfff.",'
        f'"evidence_kind":"user-stated","evidence":[{{"message_id":{mid}}}]}}]}}'
    )
    with RawServer(_message(fact)) as server:
        _run_once(db, server.base_url)
        assert server.posts == 1
    (run,) = runs(db)
    assert (run["status"], run["error"]) == ("completed", None)
    (stored,) = proposals(db)
    assert stored["text"] == "The user prefers tea \ufffd and \ufffd."
    assert stored["validation_error"] is None


def test_an_unstorable_answer_fails_the_run_with_the_reason(db: str) -> None:
    # 1e400 parses as an infinite float, which jsonb has no form for: the submit's parameter is
    # refused by the database whatever the worker does with the rest of the answer.
    prepare(db, ["t1"])
    mid = offer_cold(db, "t1", "I prefer tea.")
    fact = (
        '{"facts":[{"text":"The user prefers tea.","evidence_kind":"user-stated",'
        f'"evidence":[{{"message_id":{mid}}}]}},'
        '{"text":"Odd.","evidence_kind":"user-stated","evidence":[{"message_id":1e400}]}]}'
    )
    with RawServer(_message(fact)) as server:
        _run_once(db, server.base_url)
        assert server.posts == 1
    (run,) = runs(db)
    assert run["status"] == "failed", "the run is not left running until its lease lapses"
    assert run["error"].startswith("the answer could not be stored: "), run["error"]
    assert "json" in run["error"]
    assert proposals(db) == []
    record(
        "content-errors",
        "answers with lone surrogates (cleaned to U+FFFD, the run completed) and an infinite"
        " number (the run failed with the reason at once)",
        2,
        "0 runs left to lapse; 0 repeated model calls",
        "tests/test_worker_content.py",
    )
