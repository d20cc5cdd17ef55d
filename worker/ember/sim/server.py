"""Running the simulator: in-process for tests (``SimServer``) or as ``ember sim`` (``main``).

``SimServer`` serves uvicorn on 127.0.0.1 on a free port in a background thread::

    with SimServer(responder=Scripted([...]), clock=ManualClock()) as sim:
        client = anthropic.Anthropic(base_url=sim.base_url, api_key="test")
        ...
        sim.requests[-1].usage
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn

from .app import SimState, create_app
from .cache import CacheStore
from .clock import Clock, system_clock
from .log import LoggedRequest, RequestLog
from .models import ModelTable, load_models
from .responders import Responder, responder_from_name

START_TIMEOUT = 10.0
# `ember sim`'s port when none is given, the one every document names (ANTHROPIC_BASE_URL=
# http://127.0.0.1:8787); in-process SimServer takes a free port instead.
DEFAULT_PORT = 8787
IN_MEMORY_LOG = 1000  # entries `ember sim` keeps in memory; --log FILE keeps them all


def _models(models: ModelTable | Mapping[str, Any] | str | Path | None) -> ModelTable:
    if isinstance(models, ModelTable):
        return models
    if isinstance(models, Mapping):
        return ModelTable.from_dict(dict(models))
    return load_models(models)


def _responder(responder: Responder | str | None, named: Mapping[str, Responder]) -> Responder:
    if responder is None:
        return responder_from_name("heuristic")
    if isinstance(responder, str):
        return responder_from_name(responder, named)
    return responder


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must say TCP: asyncio only turns Nagle off (TCP_NODELAY) on sockets that do,
    # and with Nagle on every keep-alive request waits out a 40 ms delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    # Listening before uvicorn starts means a client that reads the printed URL and
    # connects at once is queued rather than refused.
    sock.listen(128)
    return sock


class SimServer:
    """The simulator on a background thread; a context manager that starts and stops it."""

    def __init__(
        self,
        responder: Responder | str | None = None,
        *,
        clock: Clock = system_clock,
        models: ModelTable | Mapping[str, Any] | str | Path | None = None,
        named: Mapping[str, Responder] | None = None,
        log_path: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.named = dict(named or {})
        self.state = SimState(
            models=_models(models),
            responder=_responder(responder, self.named),
            named=self.named,
            clock=clock,
            store=CacheStore(),
            log=RequestLog(Path(log_path) if log_path else None),
        )
        self.host = host
        self._port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    @property
    def port(self) -> int:
        if self._sock is None:
            raise RuntimeError("the simulator is not running")
        return int(self._sock.getsockname()[1])

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def requests(self) -> list[LoggedRequest]:
        """The request log so far, oldest first."""
        return self.state.log.entries()

    @property
    def cache(self) -> CacheStore:
        return self.state.store

    def wait_for_requests(
        self,
        count: int,
        timeout: float = 5.0,
        predicate: Callable[[LoggedRequest], bool] | None = None,
    ) -> list[LoggedRequest]:
        """Block until ``count`` logged requests satisfy ``predicate`` (default: any)."""
        match = predicate or (lambda _: True)
        return self.state.log.wait_for(lambda es: sum(1 for e in es if match(e)) >= count, timeout)

    def reset(
        self,
        *,
        responder: Responder | str | None = None,
        clock: Clock | None = None,
        models: ModelTable | Mapping[str, Any] | str | Path | None = None,
    ) -> None:
        """Forget every cache entry and logged request; optionally swap the responder,
        the clock or the model table. Lets one running server serve many tests."""
        self.state.store.clear()
        self.state.log.clear()
        if responder is not None:
            self.state.responder = _responder(responder, self.named)
        if clock is not None:
            self.state.clock = clock
        if models is not None:
            self.state.models = _models(models)

    def start(self) -> SimServer:
        if self._server is not None:
            raise RuntimeError("the simulator is already running")
        self._sock = _bind(self.host, self._port)
        config = uvicorn.Config(
            create_app(self.state),
            log_config=None,  # leave the host program's logging alone
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True, name="ember-sim"
        )
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the simulator did not start")
            time.sleep(0.01)  # startup takes milliseconds; uvicorn offers no event to wait on
        return self

    def stop(self) -> None:
        self.state.request_close()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(START_TIMEOUT)
        if self._sock is not None:
            self._sock.close()
        self.state.log.close()
        self._server = self._thread = None

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ember sim",
        description="A local Anthropic Messages API server with prompt-cache accounting.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port to listen on (default {DEFAULT_PORT}); 0 picks a free one and prints it",
    )
    parser.add_argument(
        "--responder",
        default="heuristic",
        help="heuristic (default), host (a host's turns and Ember's requests both), echo, hang, "
        "rate-limit[:SECONDS], overloaded, server-error, truncated, malformed-tool-input, "
        "latency:SECONDS[:NAME]",
    )
    parser.add_argument("--log", type=Path, help="append every request to this JSONL file")
    parser.add_argument("--models", type=Path, help="model table (default: the packaged one)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``ember sim``: serve in the foreground until interrupted."""
    args = build_parser().parse_args(list(argv) if argv is not None else None)
    try:
        state = SimState(
            models=load_models(args.models),
            responder=responder_from_name(args.responder),
            log=RequestLog(args.log, keep=IN_MEMORY_LOG),
        )
    except (OSError, ValueError, KeyError) as exc:
        print(f"ember sim: {exc}", file=sys.stderr)
        return 2
    try:
        sock = _bind(args.host, args.port)
    except OSError as exc:
        state.log.close()
        hint = " (is another ember sim running? --port 0 picks a free port)" if args.port else ""
        print(f"ember sim: cannot listen on {args.host}:{args.port}: {exc}{hint}", file=sys.stderr)
        return 2
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"ember sim listening on http://{host}:{sock.getsockname()[1]}", flush=True)
    print(
        f"  responder: {args.responder}; models priced as of {state.models.price_as_of}", flush=True
    )
    config = uvicorn.Config(create_app(state), log_level="warning", lifespan="on")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        state.request_close()
        state.log.close()
        sock.close()
    return 0
