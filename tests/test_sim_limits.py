"""The simulator cannot be taken down: a bounded row parser off the event loop, and
bodies capped before they are read, never kept or logged whole when refused."""

from __future__ import annotations

import json
import socket
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from ember.sim import SimServer, app, responders
from ember.sim.app import REFUSED_BODY_KEPT_BYTES
from ember.sim.responders import parse_rows
from simfixtures import STANDARD, TINY_MODELS, raw_post, text

MIB = 1024 * 1024


# --- 8. the heuristic responder ------------------------------------------------------


@pytest.mark.parametrize("spaces", [3000, 200_000])
def test_the_row_parser_is_linear_on_a_line_of_spaces(spaces: int) -> None:
    # The old pattern took 3.7 s on 2,000 spaces and 29.6 s on 4,000.
    line = "m:1 " + " " * spaces + "x"
    started = time.perf_counter()
    parse_rows(line * 5)
    assert time.perf_counter() - started < 0.5


def test_a_row_is_split_in_linear_time_even_without_the_line_cap() -> None:
    line = "m:1 " + " " * 2_000_000 + "x"
    started = time.perf_counter()
    assert responders._split_row(line) is None  # no colon: not a row
    assert responders._split_row(line + ": y") is not None
    assert time.perf_counter() - started < 0.5


def test_the_row_parser_still_reads_rows() -> None:
    rows = parse_rows(
        "m:12 user(human): I prefer tea.\n"
        "more of it\n"
        "m:13 tool_result bash [ok]: 3 files\n"
        "m:x not a row\n"
        "m:14 assistant:no-space is not a row"
    )
    assert [(r.message_id, r.role, r.author, r.tool_name, r.status) for r in rows] == [
        (12, "user", "human", None, None),
        (13, "tool_result", None, "bash", "ok"),
    ]
    assert rows[0].text == "I prefer tea.\nmore of it"
    assert rows[1].text == "3 files\nm:x not a row\nm:14 assistant:no-space is not a row"


def test_the_reported_request_is_answered_promptly_over_http(
    sim_client: anthropic.Anthropic, sim: SimServer
) -> None:
    sim.reset(responder="heuristic")
    started = time.perf_counter()
    sim_client.messages.create(
        model=STANDARD,
        max_tokens=50,
        messages=[{"role": "user", "content": "m:1 " + " " * 3000 + "x"}],
    )
    assert time.perf_counter() - started < 2.0


def test_a_slow_heuristic_answer_never_stalls_other_requests(
    sim_client: anthropic.Anthropic, sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    real = responders.parse_rows

    def blocked(value: str) -> list[responders.Row]:
        release.wait(10)
        return real(value)

    monkeypatch.setattr(responders, "parse_rows", blocked)
    sim.reset(responder="heuristic")
    slow = threading.Thread(
        target=sim_client.messages.create,
        kwargs={
            "model": STANDARD,
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}],
        },
    )
    slow.start()
    try:
        sim.wait_for_requests(1)
        started = time.perf_counter()
        sim_client.messages.create(
            model=STANDARD,
            max_tokens=5,
            messages=[{"role": "user", "content": "hello"}],
            extra_headers={"x-ember-sim-responder": "echo"},
        )
        assert time.perf_counter() - started < 2.0  # served while the heuristic is blocked
        assert sim.requests[0].status is None  # and that one is still running
    finally:
        release.set()
        slow.join(10)
    assert sim.requests[0].status == 200


def test_laying_out_a_large_request_never_stalls_other_requests(
    sim_client: anthropic.Anthropic, sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Parsing, validating and hashing a body near the cap is CPU work: it runs in a
    # worker thread, so holding it up here must not hold up another client.
    release = threading.Event()
    real = app.build_prompt

    def blocked(body: dict[str, Any], *args: Any) -> Any:
        if body["max_tokens"] == 7:
            release.wait(10)
        return real(body, *args)

    monkeypatch.setattr(app, "build_prompt", blocked)
    hello = [{"role": "user", "content": "hello"}]
    slow = threading.Thread(
        target=sim_client.messages.create,
        kwargs={"model": STANDARD, "max_tokens": 7, "messages": hello},
    )
    slow.start()
    try:
        sim.wait_for_requests(1)
        started = time.perf_counter()
        sim_client.messages.create(model=STANDARD, max_tokens=5, messages=hello)
        assert time.perf_counter() - started < 2.0
        assert sim.requests[0].status is None
    finally:
        release.set()
        slow.join(10)
    assert sim.requests[0].status == 200


# --- 9. bodies -------------------------------------------------------------------------


def _headers(extra: str) -> bytes:
    return (
        "POST /v1/messages HTTP/1.1\r\nHost: sim\r\nx-api-key: test\r\n"
        "anthropic-version: 2023-06-01\r\ncontent-type: application/json\r\n" + extra + "\r\n"
    ).encode()


def _send_chunked(base_url: str, total: int, chunk: int = 256 * 1024) -> None:
    """Send a chunked body of ``total`` bytes; the server may hang up part way."""
    host, port = base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        try:
            sock.sendall(_headers("transfer-encoding: chunked\r\n"))
            piece = b"x" * chunk
            for _ in range(total // chunk):
                sock.sendall(f"{chunk:x}\r\n".encode() + piece + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
            sock.recv(4096)
        except OSError:
            pass  # refused part way: the connection was dropped, as intended


@pytest.fixture(name="small_cap")
def _small_cap(sim: SimServer) -> Iterator[SimServer]:
    sim.state.max_body_bytes = 1 * MIB
    try:
        yield sim
    finally:
        sim.state.max_body_bytes = 32 * MIB


def test_a_declared_length_over_the_cap_is_refused_before_the_body_is_read(
    sim: SimServer,
) -> None:
    host, port = sim.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(_headers(f"content-length: {40 * MIB}\r\n"))  # and no body at all
        received = b""
        while b"request_too_large" not in received:
            piece = sock.recv(65536)
            if not piece:
                break
            received += piece
        answer = received.decode()
    assert answer.startswith("HTTP/1.1 413")
    assert '"type":"request_too_large"' in answer.replace(" ", "")
    [entry] = sim.requests
    assert (entry.status, entry.raw) == (413, b"")


def test_refused_bodies_stay_bounded_in_memory_and_in_the_log(
    small_cap: SimServer, tmp_path: Path
) -> None:
    tracemalloc.start()
    try:
        for _ in range(3):  # 8 MiB each, against a 1 MiB cap
            _send_chunked(small_cap.base_url, 8 * MIB)
        small_cap.wait_for_requests(3, predicate=lambda e: e.status == 413)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MIB  # one capped body at a time, never the 24 MiB sent
    assert all(len(e.raw) <= REFUSED_BODY_KEPT_BYTES for e in small_cap.requests)


def test_a_refused_body_is_logged_by_its_start_and_size(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    body = json.dumps({"model": STANDARD, "max_tokens": 5, "messages": "x" * (2 * MIB)})
    with SimServer(responder="echo", models=TINY_MODELS, log_path=log) as sim:
        status, _ = raw_post(sim.base_url, "/v1/messages", body.encode())
        assert status == 400
        [entry] = sim.requests
    assert len(entry.raw) == REFUSED_BODY_KEPT_BYTES and entry.body is None
    assert entry.body_bytes == len(body)
    logged: dict[str, Any] = json.loads(log.read_text())
    assert logged["body_bytes"] == len(body)
    assert len(log.read_bytes()) < 16 * 1024


def test_an_accepted_body_is_still_kept_whole(
    sim_client: anthropic.Anthropic, sim: SimServer
) -> None:
    value = "x" * 10_000
    sim_client.messages.create(
        model=STANDARD, max_tokens=5, messages=[{"role": "user", "content": [text(value)]}]
    )
    assert value in sim.requests[-1].text
