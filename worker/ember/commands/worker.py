"""`ember worker`: the sidecar's flags; the worker itself is imported only to run it."""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Callable
from typing import Any

from ember.worker.config import WorkerConfig

DESCRIPTION = """\
Run the shadow, steward and consolidation pipelines as a sidecar next to your agent runtime.
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


def _number(
    p: argparse.ArgumentParser,
    flag: str,
    default: float,
    help_text: str,
    check: Callable[[str], Any] | None = None,
) -> None:
    """A numeric flag whose default is $EMBER_WORKER_<FLAG>, else WorkerConfig's, and whose help
    says which. `check` (default: int or float, as the default is) reads what is typed; what the
    environment gives is only parsed, and checked with the rest by WorkerConfig.check."""
    parse: Callable[[str], float] = int if isinstance(default, int) else float
    text = os.environ.get("EMBER_WORKER_" + flag.removeprefix("--").replace("-", "_").upper())
    p.add_argument(
        flag,
        type=check or parse,
        default=default if text is None else parse(text),
        help=f"{help_text} (default {default:g})",
    )


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "worker",
        parents=[common],
        help="run the worker sidecar (shadow, steward and consolidation pipelines)",
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
        help="comma-separated pipelines to run (default: shadow, steward, consolidation)",
    )
    _number(p, "--concurrency", WorkerConfig.concurrency, "model calls in flight at once")
    _number(p, "--claimers", WorkerConfig.claimers, "claims made side by side once work is found")
    _number(
        p,
        "--lease",
        WorkerConfig.lease.total_seconds(),
        "lease length in seconds; renewed every third of it while a call runs",
        _positive_float,
    )
    _number(
        p,
        "--poll-interval",
        WorkerConfig.poll_interval,
        "seconds between claim attempts when no notification arrives",
        _positive_float,
    )
    p.add_argument(
        "--tick-interval",
        type=_positive_float,
        default=float(_env("TICK_INTERVAL", "0")) or None,
        help="seconds between tick() calls (default: the tick_interval setting, 1 minute)",
    )
    _number(
        p,
        "--grace",
        WorkerConfig.grace,
        "seconds calls in flight may finish after SIGTERM before release",
    )
    _number(
        p,
        "--idle-report-after",
        WorkerConfig.idle_report_after,
        "seconds without a claim before the worker logs why work waits",
        _positive_float,
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=int(_env("METRICS_PORT", "0")) or None,
        help="serve Prometheus metrics on this port (default: off)",
    )
    p.add_argument(
        "--metrics-host",
        default=_env("METRICS_HOST", WorkerConfig.metrics_host),
        help=f"address for the metrics endpoint (default {WorkerConfig.metrics_host})",
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
