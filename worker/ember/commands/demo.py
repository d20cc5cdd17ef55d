"""`ember demo`: Ember's whole job on the sample corpus, offline (docs/demo.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ember.demo import DATABASE, DEFAULT_PORT


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "demo",
        parents=[common],
        help="run Ember's whole job on the sample corpus, offline, and write the report",
    )
    p.add_argument("--corpus", help="a corpus directory (default: examples/corpus)")
    p.add_argument(
        "--threads",
        help="only these threads, comma-separated (main and the interrupted thread are needed)",
    )
    p.add_argument("--database", default=DATABASE, help=f"database to recreate ({DATABASE})")
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"simulator port ({DEFAULT_PORT})"
    )
    p.add_argument("--out", help="where the report goes (default: demo-report/)")
    p.add_argument("--plain", action="store_true", help="plain lines even on a terminal")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ember.demo.run import run as run_demo

    try:
        return run_demo(args)
    except KeyboardInterrupt:
        print("ember demo: stopped", file=sys.stderr)
        return 130
