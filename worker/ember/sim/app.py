"""The simulator's ASGI app: ``POST /v1/messages`` and ``POST /v1/messages/count_tokens``.

Every refusal, bad input included, is Anthropic-shaped JSON with the status
Anthropic would use; nothing a client receives is a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..tokens import block_tokens
from .binding import check_bindings, sign_reply
from .cache import CachePlan, CacheStore, Prompt, build_prompt
from .clock import Clock, epoch_seconds, system_clock
from .diagnostics import DiagnosticsStore
from .errors import ApiError, invalid
from .log import LoggedRequest, RequestLog
from .models import ModelInfo, ModelTable, load_models
from .responders import (
    Fault,
    Hang,
    Heuristic,
    Outcome,
    Reply,
    Responder,
    SimRequest,
    Truncated,
    responder_from_name,
)
from .validate import thinking_enabled, validate_request

RESPONDER_HEADER = "x-ember-sim-responder"
MAX_BODY_BYTES = 32 * 1024 * 1024
# A refused body is kept (in memory and in the JSONL log) only up to this many bytes:
# enough to see what was sent, never so much that refusals can fill memory or disk.
REFUSED_BODY_KEPT_BYTES = 4096
DELTA_CHARS = 64  # text is streamed in pieces this long, so clients see several deltas


@dataclass
class SimState:
    """Everything the app shares with whoever runs it (tests read the log and the cache)."""

    models: ModelTable = field(default_factory=load_models)
    responder: Responder = field(default_factory=Heuristic)
    named: dict[str, Responder] = field(default_factory=dict)
    clock: Clock = system_clock
    store: CacheStore = field(default_factory=CacheStore)
    diagnostics: DiagnosticsStore = field(default_factory=DiagnosticsStore)
    log: RequestLog = field(default_factory=RequestLog)
    max_body_bytes: int = MAX_BODY_BYTES
    closing: asyncio.Event | None = None  # set when the server stops; made in its loop
    loop: asyncio.AbstractEventLoop | None = None

    def now(self) -> float:
        return epoch_seconds(self.clock())

    def request_close(self) -> None:
        """Release hanging requests; safe to call from any thread."""
        if self.loop is not None and self.closing is not None:
            with contextlib.suppress(RuntimeError):  # the loop may already be closed
                self.loop.call_soon_threadsafe(self.closing.set)


def internal_error(exc: Exception) -> ApiError:
    return ApiError(500, f"simulator error: {type(exc).__name__}: {exc}")


def error_response(err: ApiError) -> JSONResponse:
    return JSONResponse(err.body(), status_code=err.status, headers=err.headers)


def _parse_json(raw: bytes) -> Any:
    def refuse_constant(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    try:
        return json.loads(raw.decode("utf-8"), parse_constant=refuse_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise invalid(f"the request body is not valid JSON: {exc}") from None


def _betas(headers: Mapping[str, str]) -> list[str]:
    """The anthropic-beta features of a request (a comma-separated header)."""
    return [b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()]


class BodyTooLarge(ApiError):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body exceeds {limit} bytes")


async def read_body(request: Request, limit: int) -> bytes:
    """The body, refused with a 413 as soon as it is known to exceed ``limit``.

    A declared Content-Length over the limit is refused before a byte of the body is
    read; a body without one (chunked) is read only until it passes the limit.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _check_headers(headers: Mapping[str, str]) -> None:
    if not headers.get("x-api-key") and not headers.get("authorization"):
        raise ApiError(401, "x-api-key header is required")
    if not headers.get("anthropic-version"):
        raise invalid("anthropic-version: header is required")
    content_type = headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise invalid(f"content-type must be application/json, not {content_type!r}")


def _message(body: dict[str, Any], reply: Reply, usage: dict[str, Any]) -> dict[str, Any]:
    output = reply.output_tokens
    if output is None:
        output = max(1, sum(block_tokens(b) for b in reply.content))
    return {
        "id": "msg_" + uuid.uuid4().hex[:24],
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": reply.content,
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": output},
    }


def _sse(event: dict[str, Any]) -> bytes:
    data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event['type']}\ndata: {data}\n\n".encode()


def _pieces(text: str) -> list[str]:
    return [text[i : i + DELTA_CHARS] for i in range(0, len(text), DELTA_CHARS)] or [""]


def stream_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The SSE events of a message: usage in message_start, cumulative usage at the end."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    start["usage"] = {**usage, "output_tokens": min(1, usage["output_tokens"])}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}, {"type": "ping"}]
    for index, block in enumerate(message["content"]):
        kind = block.get("type")
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            opening = {**block, "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        elif kind == "tool_use":
            opening = {**block, "input": {}}
            partial = json.dumps(block.get("input", {}), ensure_ascii=False)
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(partial)]
        elif kind == "thinking":
            opening = {**block, "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
        else:
            opening = block
        events.append({"type": "content_block_start", "index": index, "content_block": opening})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    final_usage = {
        "input_tokens": usage["input_tokens"],
        "cache_creation_input_tokens": usage["cache_creation_input_tokens"],
        "cache_read_input_tokens": usage["cache_read_input_tokens"],
        "output_tokens": usage["output_tokens"],
    }
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events.append({"type": "message_delta", "delta": delta, "usage": final_usage})
    events.append({"type": "message_stop"})
    return events


class CutOffResponse(Response):
    """Sends the start of a body, then returns without finishing: the server drops the
    connection, as a network failure halfway through a response would."""

    def __init__(self, chunks: list[bytes], status_code: int, media_type: str, length: int | None):
        super().__init__(status_code=status_code, media_type=media_type)
        self.chunks = chunks
        if length is not None:
            self.headers["content-length"] = str(length)
        else:
            del self.headers["content-length"]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        for chunk in self.chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})


class SimApp:
    def __init__(self, state: SimState) -> None:
        self.state = state

    # --- endpoints -------------------------------------------------------------------

    async def _receive(self, request: Request) -> tuple[bytes, LoggedRequest] | Response:
        """The body and its log entry, or the 413 already sent for a body too large."""
        try:
            raw = await read_body(request, self.state.max_body_bytes)
        except BodyTooLarge as err:
            entry = self.state.log.start(
                request.method, request.url.path, self.state.now(), b"", dict(request.headers)
            )
            return self._refuse(entry, err)
        entry = self.state.log.start(
            request.method, request.url.path, self.state.now(), raw, dict(request.headers)
        )
        return raw, entry

    async def messages(self, request: Request) -> Response:
        received = await self._receive(request)
        if isinstance(received, Response):
            return received
        raw, entry = received
        try:
            return await self._messages(request, raw, entry)
        except ApiError as err:
            return self._refuse(entry, err)
        except Exception as exc:  # a bug here must still reach the client as JSON
            return self._refuse(entry, internal_error(exc))

    async def count_tokens(self, request: Request) -> Response:
        received = await self._receive(request)
        if isinstance(received, Response):
            return received
        raw, entry = received
        try:
            _, _, prompt, _ = await self._prepare(request, raw, entry, count_tokens=True)
        except ApiError as err:
            return self._refuse(entry, err)
        except Exception as exc:
            return self._refuse(entry, internal_error(exc))
        result = {"input_tokens": prompt.total_tokens}
        entry.status, entry.usage, entry.response = 200, result, result
        self.state.log.finish(entry)
        return JSONResponse(result)

    # --- the messages flow -----------------------------------------------------------

    async def _prepare(
        self, request: Request, raw: bytes, entry: LoggedRequest, *, count_tokens: bool = False
    ) -> tuple[dict[str, Any], ModelInfo, Prompt, list[dict[str, Any]]]:
        """Parse, validate and lay out a request, in a worker thread: for a body near the
        size cap that is CPU work (JSON, base64 images, hashing) the event loop must not do.
        Thinking blocks that fail a binding check are left out of the prompt and listed."""

        def prepare() -> tuple[dict[str, Any], ModelInfo, Prompt, list[dict[str, Any]]]:
            body = self._body(request, raw, entry)
            info = validate_request(body, self.state.models, count_tokens=count_tokens)
            betas = _betas(request.headers)
            seen, transformations = check_bindings(body, info, betas)
            return body, info, build_prompt(seen, info, betas), transformations

        return await anyio.to_thread.run_sync(prepare)

    async def _messages(self, request: Request, raw: bytes, entry: LoggedRequest) -> Response:
        body, info, prompt, transformations = await self._prepare(request, raw, entry)
        diagnose = self.state.diagnostics.requested(body)
        responder = self._responder(request)
        entry.responder = responder.name
        plan = self.state.store.plan(prompt, info, entry.received_at)
        entry.cache = plan.detail
        sim_request = SimRequest(entry.seq, body, info, request.headers)
        if body["max_tokens"] == 0:
            # Pre-warming: the prompt is processed and cached, nothing is generated, and
            # no responder is asked (a scripted queue keeps its items).
            outcome: Outcome = Reply([], stop_reason="max_tokens", output_tokens=0)
        else:
            outcome = await responder.respond(sim_request)
        stream = bool(body.get("stream"))

        if isinstance(outcome, Hang):
            return await self._hang(request, entry)
        if isinstance(outcome, Fault) and not (outcome.mid_stream and stream):
            raise ApiError(outcome.status, outcome.message, outcome.error_type, outcome.headers)
        if isinstance(outcome, Truncated):
            reply = outcome.reply or await _heuristic_reply(sim_request)
            message = _message(body, reply, plan.usage)
            return self._cut_off(entry, plan, info, message, stream, outcome.fraction)
        if isinstance(outcome, Fault):  # mid-stream: the response starts, then fails
            message = _message(body, Reply([]), plan.usage)
            return self._stream(entry, plan, info, message, fault=outcome)
        message = _message(body, _bound(body, info, outcome), plan.usage)
        if transformations:
            message["input_transformations"] = transformations
        if diagnose:
            message["diagnostics"] = self.state.diagnostics.diagnose(body)
            self.state.diagnostics.store(message["id"], body)
        if stream:
            return self._stream(entry, plan, info, message)
        self._started(entry, plan, info, message)
        self.state.log.finish(entry)
        # Says who answered: a client can tell the simulator's rule-based answers from a model's.
        return JSONResponse(message, headers={RESPONDER_HEADER: str(entry.responder)})

    def _body(self, request: Request, raw: bytes, entry: LoggedRequest) -> dict[str, Any]:
        _check_headers(request.headers)
        if len(raw) > self.state.max_body_bytes:
            raise BodyTooLarge(self.state.max_body_bytes)
        body = _parse_json(raw)
        entry.body = body
        if not isinstance(body, dict):
            raise invalid("request body must be a JSON object")
        return body

    def _responder(self, request: Request) -> Responder:
        name = request.headers.get(RESPONDER_HEADER)
        if not name:
            return self.state.responder
        try:
            return responder_from_name(name, self.state.named)
        except ValueError as exc:
            raise invalid(f"{RESPONDER_HEADER}: {exc}") from None

    def _started(
        self, entry: LoggedRequest, plan: CachePlan, info: ModelInfo, message: dict[str, Any]
    ) -> None:
        """The response starts: new entries become readable, reads refresh theirs."""
        self.state.store.commit(plan, self.state.now())
        entry.status = 200
        entry.usage = message["usage"]
        entry.response = message
        entry.cost_usd = info.list_price_usd(message["usage"])

    def _refuse(self, entry: LoggedRequest, err: ApiError) -> JSONResponse:
        entry.status = err.status
        entry.error = err.body()
        entry.body_bytes = len(entry.raw)
        if len(entry.raw) > REFUSED_BODY_KEPT_BYTES:  # never keep a refused body whole
            entry.raw = entry.raw[:REFUSED_BODY_KEPT_BYTES]
            entry.body = None
        self.state.log.finish(entry)
        return error_response(err)

    def _stream(
        self,
        entry: LoggedRequest,
        plan: CachePlan,
        info: ModelInfo,
        message: dict[str, Any],
        fault: Fault | None = None,
    ) -> StreamingResponse:
        events = stream_events(message)
        if fault is not None:  # message_start, then an `error` event in place of the answer
            events = [events[0], ApiError(fault.status, fault.message, fault.error_type).body()]

        async def body() -> AsyncIterator[bytes]:
            self._started(entry, plan, info, message)
            if fault is not None:
                entry.error = events[-1]
            try:
                for event in events:
                    yield _sse(event)
            except BaseException:
                entry.disconnected = True
                raise
            finally:
                self.state.log.finish(entry)

        headers = {**_sse_headers(), RESPONDER_HEADER: str(entry.responder)}
        return StreamingResponse(body(), media_type="text/event-stream", headers=headers)

    def _cut_off(
        self,
        entry: LoggedRequest,
        plan: CachePlan,
        info: ModelInfo,
        message: dict[str, Any],
        stream: bool,
        fraction: float,
    ) -> Response:
        self._started(entry, plan, info, message)
        entry.error = {"type": "truncated", "fraction": fraction}
        self.state.log.finish(entry)
        if stream:
            events = [_sse(e) for e in stream_events(message)]
            kept = events[: max(1, int(len(events) * fraction))]
            return CutOffResponse(kept, 200, "text/event-stream", None)
        full = json.dumps(message, ensure_ascii=False).encode()
        return CutOffResponse(
            [full[: int(len(full) * fraction)]], 200, "application/json", len(full)
        )

    async def _hang(self, request: Request, entry: LoggedRequest) -> Response:
        """Wait until the client disconnects or the server stops."""
        closing = self.state.closing
        disconnected = False

        async def client_gone(scope: anyio.CancelScope) -> None:
            nonlocal disconnected
            while (await request.receive())["type"] != "http.disconnect":
                pass
            disconnected = True
            scope.cancel()

        async def server_closing(scope: anyio.CancelScope) -> None:
            if closing is not None:
                await closing.wait()
                scope.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(client_gone, group.cancel_scope)
            group.start_soon(server_closing, group.cancel_scope)
        if not disconnected:
            return self._refuse(entry, ApiError(529, "the simulator stopped while a request hung"))
        entry.disconnected = True
        self.state.log.finish(entry)
        return Response(status_code=204)  # nobody is listening any more


def _bound(body: dict[str, Any], info: ModelInfo, reply: Reply) -> Reply:
    """On a model with preserved thinking, the reply with a thinking block when the request
    turned thinking on, every thinking block signed with its model and prefix."""
    if not info.preserved_thinking:
        return reply
    content = copy.deepcopy(reply.content)
    if thinking_enabled(body) and not any(b.get("type") == "thinking" for b in content):
        content.insert(0, {"type": "thinking", "thinking": "Considering the request.",
                           "signature": ""})  # fmt: skip
    sign_reply(body, info, content)
    return dataclasses.replace(reply, content=content)


async def _heuristic_reply(request: SimRequest) -> Reply:
    outcome = await Heuristic().respond(request)
    return outcome if isinstance(outcome, Reply) else Reply.text("")


def _sse_headers() -> dict[str, str]:
    return {"cache-control": "no-cache"}


async def _http_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, HTTPException):
        status = exc.status_code
        message = "Not Found" if status == 404 else exc.detail
        if status == 404:
            message = f"{request.method} {request.url.path}: no such route"
        return error_response(ApiError(status, message, headers=dict(exc.headers or {})))
    return error_response(internal_error(exc))


def create_app(state: SimState) -> Starlette:
    app = SimApp(state)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        state.loop = asyncio.get_running_loop()
        state.closing = asyncio.Event()
        yield
        state.closing.set()

    routes = [
        Route("/v1/messages", app.messages, methods=["POST"]),
        Route("/v1/messages/count_tokens", app.count_tokens, methods=["POST"]),
    ]
    handlers: dict[Any, Any] = {HTTPException: _http_error, Exception: _http_error}
    return Starlette(routes=routes, exception_handlers=handlers, lifespan=lifespan)
