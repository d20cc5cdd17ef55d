"""An eval run as SQL reports it (functions/096_eval_report.sql): terminal tables, JSON, and the
data of the HTML section (ember.evaluation.html). Nothing is computed here that SQL did not: the
figures are formatted, never derived.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row
from rich.table import Table
from rich.text import Text

from ember import queries
from ember.comparison.report import jsonable
from ember.tables import Printer, console_for

Row = dict[str, Any]

COST_NOTE = (
    "List-price snapshot, not subscription billing; 'unknown' when a call or run lacks a price. "
    "Cost per correct answer = (extraction + answering) / correct; the judge's cost is the "
    "measurement's, shown apart."
)
TERMINAL_DISAGREEMENTS = 10


@dataclass
class EvalReport:
    run: Row
    summary: list[Row]
    categories: list[Row]
    disagreements: list[Row]
    questions: list[Row]
    extraction: list[Row]

    @property
    def headline(self) -> str:
        """The report's first line: whether a language model answered at all."""
        calls, simulated = int(self.run["calls"]), int(self.run["simulated_calls"])
        if calls and simulated == calls:
            return (
                "These figures measure the plumbing, not a language model: every answer and "
                "verdict came from ember sim's rule-based responder."
            )
        if simulated:
            return (
                f"These figures partly measure the plumbing: {simulated} of {calls} answer and "
                "judge calls came from ember sim's rule-based responder, not a language model."
            )
        return (
            f"Memory quality on {self.run['benchmark']}: answers by {self.run['answer_model']}, "
            f"verdicts by {self.run['judge_model']}, the top {self.run['top_k']} facts of "
            "search_memory as context."
        )

    @property
    def scope(self) -> str:
        r = self.run
        limit = f", limited to {r['question_limit']} questions" if r["question_limit"] else ""
        return (
            f"run {r['run_id']} ({r['status']}): {r['benchmark']} file {r['source']} "
            f"(sha256 {str(r['source_sha256'])[:12]}), {r['conversations']} conversations, "
            f"{r['questions']} questions: {int(r['questions']) - int(r['excluded'])} asked, "
            f"{r['excluded']} excluded by the exclusion list{limit}"
        )

    def as_json(self) -> dict[str, Any]:
        plain: dict[str, Any] = jsonable(
            {
                "note": self.headline,
                "run": self.run,
                "pipelines": self.summary,
                "categories": self.categories,
                "disagreements": self.disagreements,
                "extraction_cost": self.extraction,
                "questions": self.questions,
                "notes": {
                    "cost": COST_NOTE,
                    "accuracy": "correct / questions asked; an answer whose call failed has no "
                    "verdict and counts as not correct (failed)",
                    "context_tokens": "memory shown to the answer model per question, by "
                    "Ember's token estimate (code points / 4), not a tokenizer",
                    "search": "search_memory as the client saw it, round trip included",
                },
            }
        )
        return plain


def _rows(conn: psycopg.Connection[Any], query: Any, params: dict[str, Any]) -> list[Row]:
    with conn.cursor(row_factory=dict_row) as cur:
        return list(cur.execute(query, params).fetchall())


def collect(conn: psycopg.Connection[Any], run_id: int | None = None) -> EvalReport | None:
    """The run (the latest when none is named), or None when the database holds no eval run."""
    if run_id is None:
        latest = _rows(conn, queries.EVAL_LATEST_RUN, {})
        if not latest or latest[0]["run_id"] is None:
            return None
        run_id = int(latest[0]["run_id"])
    runs = _rows(conn, queries.EVAL_RUN, {"run": run_id})
    if not runs:
        return None
    return EvalReport(
        run=runs[0],
        summary=_rows(conn, queries.EVAL_SUMMARY, {"run": run_id}),
        categories=_rows(conn, queries.EVAL_CATEGORIES, {"run": run_id}),
        disagreements=_rows(conn, queries.EVAL_DISAGREEMENTS, {"run": run_id}),
        questions=_rows(conn, queries.EVAL_QUESTION_RESULTS, {"run": run_id}),
        extraction=_rows(conn, queries.EVAL_EXTRACTION_COST, {"run": run_id}),
    )


# --- formatting ----------------------------------------------------------------------------------


def fmt(value: Any, kind: str = "") -> str:
    """A figure for people: an unknown price reads 'unknown', a missing figure '-'."""
    if value is None:
        return "unknown" if kind == "usd" else "-"
    if kind == "usd":
        amount = Decimal(value)
        return f"${amount:.6f}" if abs(amount) < Decimal("0.01") else f"${amount:.4f}"
    if kind == "pct":
        return f"{float(value) * 100:.1f}%"
    if kind == "tokens":
        return f"{float(value):,.0f}"
    if kind == "ms":
        return f"{float(value):,.1f} ms"
    return str(value)


def accuracy(correct: Any, questions: Any) -> str:
    if not questions:
        return "-"
    return f"{int(correct)}/{int(questions)} ({int(correct) / int(questions) * 100:.1f}%)"


SUMMARY_COLUMNS: list[tuple[str, str, str]] = [
    ("questions", "questions", ""),
    ("correct", "correct", ""),
    ("accuracy", "accuracy", "pct"),
    ("failed", "failed", ""),
    ("context_tokens_mean", "context tokens / question", "tokens"),
    ("search_p50_ms", "search p50", "ms"),
    ("search_p95_ms", "search p95", "ms"),
    ("extraction_usd", "extraction", "usd"),
    ("answer_usd", "answering", "usd"),
    ("usd_per_correct", "per correct answer", "usd"),
    ("judge_usd", "judging", "usd"),
]


def evidence_text(pointers: list[dict[str, Any]]) -> str:
    parts = []
    for p in pointers:
        name = p.get("source") or (
            f"m:{p['message_id']}"
            if p.get("message_id")
            else f"generation {p.get('generation_id')}"
        )
        at = str(p.get("at") or "")[:10]
        parts.append(f"{name} {at}".strip())
    return ", ".join(parts) or "no evidence"


def used(side: dict[str, Any]) -> list[dict[str, Any]]:
    """The facts an answer rests on: those it cited, or every one shown when it cited none."""
    shown = list(side.get("shown") or [])
    cited = [f for f in shown if f.get("cited")]
    return cited or shown


def print_tables(rep: EvalReport, console: Printer) -> None:
    def say(text: str) -> None:
        # Questions, answers and fact texts are data: never read as rich markup.
        console.print(text, markup=False, highlight=False)

    say(rep.headline)
    say(rep.scope)
    table = Table(title="Accuracy and cost per pipeline")
    table.add_column("pipeline")
    for _, label, _ in SUMMARY_COLUMNS:
        table.add_column(label, justify="right")
    for r in rep.summary:
        table.add_row(r["pipeline"], *[fmt(r[k], kind) for k, _, kind in SUMMARY_COLUMNS])
    console.print(table)
    say(COST_NOTE)

    cats = Table(title="Accuracy per question category")
    for col in ("category", "questions", "steward", "shadow"):
        cats.add_column(col, justify="left" if col == "category" else "right")
    by: dict[str, dict[str, Row]] = {}
    for r in rep.categories:
        by.setdefault(r["category"], {})[r["pipeline"]] = r
    for category in sorted(by):
        s, w = by[category].get("steward", {}), by[category].get("shadow", {})
        cats.add_row(
            Text(category),
            str(s.get("questions", w.get("questions", 0))),
            accuracy(s.get("correct", 0), s.get("questions", 0)),
            accuracy(w.get("correct", 0), w.get("questions", 0)),
        )
    console.print(cats)

    n = len(rep.disagreements)
    say(f"Questions where the pipelines disagree: {n}")
    for d in rep.disagreements[:TERMINAL_DISAGREEMENTS]:
        say(f"  {d['question_id']} ({d['category']}): {d['question']}")
        say(f"    gold: {d['gold']}")
        for pipeline in ("steward", "shadow"):
            side = d[pipeline]
            verdict = side.get("verdict") or side.get("status")
            answer = side.get("answer") if side.get("answer") is not None else "-"
            say(f"    {pipeline} ({verdict}): {answer}")
            say(f"      judge: {side.get('reason') or side.get('error') or '-'}")
            for fact in used(side):
                say(
                    f"      F{fact['rank']}{'' if fact.get('cited') else ' (shown)'} "
                    f"[{fact.get('evidence_kind')}; {evidence_text(fact.get('evidence') or [])}]: "
                    f"{fact.get('text')}"
                )
    if n > TERMINAL_DISAGREEMENTS:
        say(f"  ... and {n - TERMINAL_DISAGREEMENTS} more in the JSON and HTML reports")


def to_json(rep: EvalReport) -> str:
    return json.dumps(rep.as_json(), ensure_ascii=False, indent=2)


def finish(url: str, run_id: int, out: Path, *, json_out: bool, say: Callable[[str], None]) -> int:
    """Read the finished run back, write eval.json and eval.html into `out`, print the report."""
    from ember.commands.base import EXIT_REJECTED, output
    from ember.comparison import html as compare_html
    from ember.comparison.report import collect as collect_comparison
    from ember.comparison.report import read_only
    from ember.evaluation import html

    with read_only(url) as conn:
        rep = collect(conn, run_id)
        comparison = collect_comparison(conn, None, None)
    assert rep is not None
    with output(str(out / "eval.json")) as handle:
        handle.write(to_json(rep) + "\n")
    with output(str(out / "eval.html")) as handle:
        handle.write(compare_html.render(comparison, sections=[html.section(rep)]))
    if json_out:
        print(to_json(rep))
    else:
        print_tables(rep, console_for(sys.stdout))
    say(f"reports: {out / 'eval.json'}, {out / 'eval.html'}")
    say(f"the database stays for psql and `ember compare`: {url}")
    failed = any(int(r["failed"]) for r in rep.summary)
    return EXIT_REJECTED if failed or rep.run["status"] != "completed" else 0
