"""`ember eval FILE`: both pipelines' memory on a LoCoMo or LongMemEval file (docs/eval.md)."""

from __future__ import annotations

import argparse
from typing import Any

DATABASE = "ember_eval"
CONFIRM_ABOVE = 5.0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "eval",
        parents=[common],
        help="answer a LoCoMo or LongMemEval file's questions from each pipeline's memory, "
        "judged, with cost per correct answer",
    )
    p.add_argument("file", help="the benchmark's JSON file (LoCoMo's or LongMemEval's format)")
    p.add_argument(
        "--exclude", metavar="FILE", help="question ids to leave out (known-wrong gold answers)"
    )
    p.add_argument("--limit", type=int, metavar="N", help="ask only the first N questions")
    p.add_argument(
        "--top-k", type=int, default=10, help="facts of search_memory shown per question (10)"
    )
    p.add_argument("--answer-model", help="the model that answers (default: the first light one)")
    p.add_argument("--judge-model", help="the model that judges (default: the first standard one)")
    p.add_argument(
        "--dry-run", action="store_true", help="print the cost estimate and call nothing"
    )
    p.add_argument(
        "--confirm-above",
        type=float,
        default=CONFIRM_ABOVE,
        metavar="USD",
        help=f"ask before a run estimated above this many dollars ({CONFIRM_ABOVE:g})",
    )
    p.add_argument("--yes", action="store_true", help="run whatever the estimate")
    p.add_argument(
        "--offline",
        action="store_true",
        help="answer with ember sim's rule-based responder (also when no ANTHROPIC_API_KEY and "
        "no ANTHROPIC_BASE_URL is set)",
    )
    p.add_argument("--database", default=DATABASE, help=f"database to recreate ({DATABASE})")
    p.add_argument("--out", default="eval-report", help="where eval.json, eval.html and logs go")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--concurrency", type=int, default=4, help="model calls in flight at once (4)")
    p.add_argument(
        "--drain-timeout",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="longest wait for the worker to digest one conversation (3600)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ember.evaluation.run import run as run_eval

    return run_eval(args)
