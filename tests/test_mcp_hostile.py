"""`ember mcp` under hostile input, as raw JSON-RPC bytes over stdio and streamable HTTP.

Every message gets an answer, within a timeout: a tool call whose arguments the tools cannot
take (an id outside bigint, a NUL in a string, an over-long query) is a tool result with
`isError` naming the argument, checked before any SQL runs; a message the SDK cannot read (not
JSON, a lone surrogate escape, not JSON-RPC) is a JSON-RPC error, with the request's id when it
can be read. No answer carries SQL, driver text or a traceback, and the server keeps serving.
The viewer is checked at start: the memory steward, or a viewer that is no thread id, stops the
server with one line and exit 2.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Protocol

import psycopg
import pytest

from ember.memory import QUERY_MAX_CHARS
from reliability import record

EMBER = str(Path(sys.executable).parent / "ember")
TIMEOUT = 30.0
PROTOCOL = "2025-06-18"
# What must never reach a client: SQL, driver and validator text, tracebacks.
INTERNALS = (
    "psycopg",
    "Traceback",
    "SQL",
    "ERROR:",
    "LINE 1",
    "HINT",
    "does not exist",
    'File "',
    "pydantic",
    "validation error for",
    "jsonrpc_message_adapter",
)
TEA = "The user prefers green tea in the morning."
# Hostile messages and viewers answered cleanly, across the module, for docs/reliability.md.
ANSWERED = {"attacks": 0}


@pytest.fixture(scope="module", autouse=True)
def _ledger() -> Iterator[None]:
    yield
    record(
        "hostile-mcp",
        "raw JSON-RPC over stdio and HTTP: ids outside bigint, NUL, lone surrogates, over-long"
        " queries, bytes that are not JSON, JSON that is no message, a database fault;"
        " the steward and malformed ids as --viewer",
        ANSWERED["attacks"],
        "0 requests unanswered; 0 replies with SQL, driver text or a traceback",
        "tests/test_mcp_hostile.py",
    )


@pytest.fixture(name="hostdb")
def _hostdb(db: str) -> str:
    """A reader thread, one fact, and the steward's record (so that its thread exists)."""
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(
            "SELECT ember.create_thread("
            "'default', 'reader', 'side', NULL, NULL, 'open', 'claude-sonnet-4-5')"
        )
        conn.execute("SELECT ember.ensure_steward_thread('default')")
        conn.execute(
            "INSERT INTO ember.facts (text, evidence_kind) VALUES (%s, 'user-stated')", (TEA,)
        )
    return db


def _server_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}


def _call(rid: Any, name: str, arguments: Any) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    return json.dumps(message).encode()


def _initialize() -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "hostile", "version": "1"},
            },
        }
    ).encode()


INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


class Transport(Protocol):
    def send(self, raw: bytes) -> dict[str, Any]:
        """One message out, its reply back (raises on a timeout)."""


class RawStdio:
    """A real `ember mcp` over stdio, spoken to line by line."""

    def __init__(self, url: str) -> None:
        self.proc = subprocess.Popen(
            [EMBER, "mcp", "--database-url", url, "--viewer", "reader"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_server_env(),
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._errors: list[bytes] = []
        assert self.proc.stdout is not None and self.proc.stderr is not None
        threading.Thread(target=self._pump, args=(self.proc.stdout,), daemon=True).start()
        self._stderr = threading.Thread(
            target=self._errors.extend, args=(self.proc.stderr,), daemon=True
        )
        self._stderr.start()

    def _pump(self, stream: IO[bytes]) -> None:
        for line in stream:
            self._lines.put(line)

    @property
    def stderr(self) -> bytes:
        return b"".join(self._errors)

    def write(self, raw: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def send(self, raw: bytes) -> dict[str, Any]:
        self.write(raw)
        try:
            line = self._lines.get(timeout=TIMEOUT)
        except queue.Empty:
            pytest.fail(f"no reply within {TIMEOUT}s to {raw[:120]!r}")
        reply: dict[str, Any] = json.loads(line)
        reply["_raw"] = line.decode()
        return reply

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()  # end of input: the server exits
        try:
            self.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(TIMEOUT)
        self._stderr.join(TIMEOUT)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RawHttp:
    """A real `ember mcp --http`, one POST per message (urllib, so every byte is ours)."""

    def __init__(self, url: str) -> None:
        port = _free_port()
        argv = [EMBER, "mcp", "--database-url", url, "--viewer", "reader"]
        self.proc = subprocess.Popen(
            [*argv, "--http", "--port", str(port)],
            env=_server_env(),
            stderr=subprocess.PIPE,
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()  # said once the socket listens
        assert b"serving http://127.0.0.1:" in line, line
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }

    def post(self, raw: bytes) -> tuple[int, dict[str, str], str]:
        request = urllib.request.Request(self.url, data=raw, headers=self.headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                headers = {k.lower(): v for k, v in response.headers.items()}
                return response.status, headers, response.read().decode()
        except urllib.error.HTTPError as exc:
            headers = {k.lower(): v for k, v in exc.headers.items()}
            return exc.code, headers, exc.read().decode()

    def start_session(self) -> None:
        status, headers, _ = self.post(_initialize())
        assert status == 200
        self.headers["mcp-session-id"] = headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = PROTOCOL
        status, _, _ = self.post(INITIALIZED)
        assert status == 202

    def send(self, raw: bytes) -> dict[str, Any]:
        _, _, body = self.post(raw)
        # A JSON body, or server-sent events whose data line is the reply.
        data = [line[5:].strip() for line in body.splitlines() if line.startswith("data:")]
        text = next((d for d in data if d), body)
        reply: dict[str, Any] = json.loads(text)
        reply["_raw"] = body
        return reply

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(TIMEOUT)


@pytest.fixture(name="server", params=["stdio", "http"])
def _server(request: pytest.FixtureRequest, hostdb: str) -> Iterator[Transport]:
    if request.param == "stdio":
        stdio = RawStdio(hostdb)
        try:
            assert stdio.send(_initialize())["id"] == 0
            stdio.write(INITIALIZED)
            yield stdio
        finally:
            stdio.close()
    else:
        http = RawHttp(hostdb)
        try:
            http.start_session()
            yield http
        finally:
            http.close()


def _clean(reply: dict[str, Any]) -> None:
    ANSWERED["attacks"] += 1
    for word in INTERNALS:
        assert word not in reply["_raw"], f"{word!r} reached the client: {reply['_raw'][:400]}"


def _tool_error(reply: dict[str, Any], rid: int) -> str:
    """The text of a tool result with isError, for request `rid`."""
    assert reply.get("id") == rid, reply
    assert "error" not in reply, f"a JSON-RPC error instead of a tool result: {reply}"
    result = reply["result"]
    assert result["isError"] is True, result
    _clean(reply)
    return "\n".join(c.get("text", "") for c in result["content"])


def _rpc_error(reply: dict[str, Any], rid: int | None, code: int) -> str:
    assert reply.get("id") == rid, reply
    assert reply["error"]["code"] == code, reply
    _clean(reply)
    return str(reply["error"]["message"])


def _still_serving(server: Transport) -> None:
    reply = server.send(_call(99, "search_memory", {"query": "green tea"}))
    assert reply["id"] == 99 and reply["result"]["isError"] is False
    assert TEA in reply["result"]["content"][0]["text"]


@pytest.mark.parametrize("fact_id", [2**63, 2**64, -1, 0])
def test_a_fact_id_outside_bigint_or_not_positive_is_a_tool_error(
    server: Transport, fact_id: int
) -> None:
    text = _tool_error(server.send(_call(7, "explain_fact", {"fact_id": fact_id})), 7)
    assert text.startswith("explain_fact refused: fact_id: "), text
    _still_serving(server)


def test_a_nul_in_the_query_is_a_tool_error_naming_it(server: Transport) -> None:
    text = _tool_error(server.send(_call(8, "search_memory", {"query": "green\u0000tea"})), 8)
    assert text.startswith("search_memory refused: query: ") and "NUL" in text, text
    _still_serving(server)


def test_an_over_long_query_is_a_tool_error_naming_it(server: Transport) -> None:
    for rid, length in [(9, QUERY_MAX_CHARS + 1), (10, 200_000)]:
        text = _tool_error(server.send(_call(rid, "search_memory", {"query": "x" * length})), rid)
        assert text.startswith("search_memory refused: query: "), text
        assert f"at most {QUERY_MAX_CHARS} characters" in text
    _still_serving(server)


def test_a_lone_surrogate_is_answered_with_the_request_id(server: Transport) -> None:
    # json.dumps writes the lone surrogate as the escape "\ud800", which JSON's grammar allows
    # and no UTF-8 text can hold.
    raw = _call(11, "search_memory", {"query": "tea \ud800"})
    assert b"\\ud800" in raw
    message = _rpc_error(server.send(raw), 11, -32600)
    assert "lone surrogate" in message
    # In the tool's name, and in the id itself (which is then not echoed).
    raw = _call(12, "search_\udfff", {"query": "tea"})
    assert "lone surrogate" in _rpc_error(server.send(raw), 12, -32600)
    raw = _call("id-\ud800", "search_memory", {"query": "tea"})
    assert "lone surrogate" in _rpc_error(server.send(raw), None, -32600)
    _still_serving(server)


@pytest.mark.parametrize(
    "raw",
    [b'{"jsonrpc":"2.0","id":13,"method":tools/call', b"\x00\x01\x02", b"{", b"nul\x00l"],
    ids=["unquoted", "control-bytes", "unclosed", "nul-byte"],
)
def test_invalid_json_is_a_parse_error(server: Transport, raw: bytes) -> None:
    assert "Parse error" in _rpc_error(server.send(raw), None, -32700)
    _still_serving(server)


@pytest.mark.parametrize(
    ("raw", "rid"),
    [(b"[1, 2]", None), (b'{"jsonrpc":"2.0","id":14,"method":3}', 14), (b"42", None)],
    ids=["batch", "method-not-a-string", "a-number"],
)
def test_json_that_is_no_message_is_an_invalid_request(
    server: Transport, raw: bytes, rid: int | None
) -> None:
    assert "Invalid Request" in _rpc_error(server.send(raw), rid, -32600)
    _still_serving(server)


def test_an_unexpected_database_error_is_a_generic_tool_error(
    server: Transport, hostdb: str
) -> None:
    with psycopg.connect(hostdb, autocommit=True) as conn:
        conn.execute("ALTER FUNCTION ember.explain_fact_as(text, text, bigint) RENAME TO gone")
    text = _tool_error(server.send(_call(15, "explain_fact", {"fact_id": 1})), 15)
    assert text.startswith("explain_fact failed: an unexpected error"), text
    _still_serving(server)


def test_the_details_of_an_unexpected_error_go_to_the_log(hostdb: str) -> None:
    stdio = RawStdio(hostdb)
    try:
        stdio.send(_initialize())
        stdio.write(INITIALIZED)
        with psycopg.connect(hostdb, autocommit=True) as conn:
            conn.execute("ALTER FUNCTION ember.explain_fact_as(text, text, bigint) RENAME TO gone")
        _tool_error(stdio.send(_call(16, "explain_fact", {"fact_id": 1})), 16)
    finally:
        stdio.close()
    assert b"explain_fact_as" in stdio.stderr and b"Traceback" in stdio.stderr


def _start(url: str, viewer: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EMBER, "mcp", "--database-url", url, f"--viewer={viewer}"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=_server_env(),
    )


def test_the_steward_as_viewer_is_refused_at_start(hostdb: str) -> None:
    done = _start(hostdb, "memory-steward")
    assert done.returncode == 2, done.stderr
    ANSWERED["attacks"] += 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ember mcp: --viewer "), done.stderr
    assert "memory steward" in lines[0]
    assert done.stdout == ""


@pytest.mark.parametrize(
    "viewer",
    ["reader; DROP TABLE ember.facts", "a b", "-reader", "line\nbreak", "x" * 129, "é"],
)
def test_a_viewer_that_is_no_thread_id_is_refused_at_start(hostdb: str, viewer: str) -> None:
    done = _start(hostdb, viewer)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "is not a thread id" in lines[0], done.stderr
    ANSWERED["attacks"] += 1
    for word in INTERNALS:
        assert word not in done.stderr


def test_an_unknown_viewer_is_still_refused_by_the_database(hostdb: str) -> None:
    done = _start(hostdb, "nobody")
    assert done.returncode == 9 and "unknown viewer" in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1
