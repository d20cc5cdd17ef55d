"""`ember worker`: the sidecar's flags; the worker itself is imported only to run it."""

from __future__ import annotations

import argparse
import os
import socket
from typing import Any

DESCRIPTION = """\
Run the shadow (and, when installed, steward) pipelines as a sidecar next to your agent runtime.
The worker LISTENs for ember_wake and ember_cancel, polls as a fallback, calls tick() for the
fleet (one worker at a time), claims runs, calls the model through the Anthropic Messages API
(or `ember sim`), keeps leases alive and submits each outcome through its one SQL procedure.
SIGTERM or SIGINT: stop claiming, let calls in flight finish within --grace, release the rest.

environment:
  DATABASE_URL         the PostgreSQL to work on (default: the embedded development server)
  ANTHROPIC_API_KEY    the model API key (never logged); may be omitted with ANTHROPIC_BASE_URL
  ANTHROPIC_BASE_URL   a compatible endpoint, e.g. http://127.0.0.1:8787 for `ember sim`
  EMBER_WORKER_*       the default of each flag below, e.g. EMBER_WORKER_CONCURRENCY=8

exit codes: 0 stopped cleanly; 2 configuration error (bad flag, no API key and no base URL);
7 the database is not migrated (run `ember migrate`).
"""


def _env(name: str, default: str) -> str:
    return os.environ.get(f"EMBER_WORKER_{name}", default)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from exc
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "worker",
        parents=[common],
        help="run the worker sidecar (shadow and steward pipelines)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--database-url",
        default=None,
        help="PostgreSQL connection string (default: $DATABASE_URL, else the embedded server)",
    )
    p.add_argument(
        "--name",
        default=_env("NAME", f"{socket.gethostname()}:{os.getpid()}"),
        help="this worker's name, recorded on every run it claims (default: host:pid)",
    )
    p.add_argument(
        "--pipelines",
        default=_env("PIPELINES", ""),
        help="comma-separated pipelines to run (default: every installed one: shadow, steward)",
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=int(_env("CONCURRENCY", "4")),
        help="model calls in flight at once (default 4)",
    )
    p.add_argument(
        "--claimers",
        type=int,
        default=int(_env("CLAIMERS", "2")),
        help="claims made side by side once work is found (default 2)",
    )
    p.add_argument(
        "--lease",
        type=_positive_float,
        default=float(_env("LEASE", "300")),
        help="lease length in seconds; renewed every third of it while a call runs (default 300)",
    )
    p.add_argument(
        "--poll-interval",
        type=_positive_float,
        default=float(_env("POLL_INTERVAL", "10")),
        help="seconds between claim attempts when no notification arrives (default 10)",
    )
    p.add_argument(
        "--tick-interval",
        type=_positive_float,
        default=float(_env("TICK_INTERVAL", "0")) or None,
        help="seconds between tick() calls (default: the tick_interval setting, 1 minute)",
    )
    p.add_argument(
        "--grace",
        type=float,
        default=float(_env("GRACE", "30")),
        help="seconds calls in flight may finish after SIGTERM before release (default 30)",
    )
    p.add_argument(
        "--idle-report-after",
        type=_positive_float,
        default=float(_env("IDLE_REPORT_AFTER", "60")),
        help="seconds without a claim before the worker logs why work waits (default 60)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=int(_env("METRICS_PORT", "0")) or None,
        help="serve Prometheus metrics on this port (default: off)",
    )
    p.add_argument(
        "--metrics-host",
        default=_env("METRICS_HOST", "127.0.0.1"),
        help="address for the metrics endpoint (default 127.0.0.1)",
    )
    p.add_argument(
        "--log-format",
        choices=["auto", "json", "text"],
        default=_env("LOG_FORMAT", "auto"),
        help="json (one object a line), text, or auto: text on a terminal, else json",
    )
    p.add_argument(
        "--log-level", default=_env("LOG_LEVEL", "info"), help="debug, info, warning (default info)"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ember.worker.cli import run_worker

    return run_worker(args)
