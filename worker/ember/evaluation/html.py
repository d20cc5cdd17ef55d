"""An eval run as one section of the HTML report: a fragment (no page, no script, no style of its
own beyond the page's classes) that `ember compare --html` and `ember eval` place in the page.

Every text is escaped: fact texts, answers, questions and the judge's reasons are written by
models and users, and must never become markup.
"""

from __future__ import annotations

from html import escape
from typing import Any

from ember.comparison.html import table
from ember.evaluation.report import (
    COST_NOTE,
    SUMMARY_COLUMNS,
    EvalReport,
    accuracy,
    evidence_text,
    fmt,
    used,
)


def _side(pipeline: str, side: dict[str, Any]) -> str:
    verdict = side.get("verdict") or side.get("status") or "-"
    answer = side.get("answer") if side.get("answer") is not None else "-"
    facts = "".join(
        f'<li data-cited="{str(bool(f.get("cited"))).lower()}">F{int(f["rank"])} '
        f"[{escape(str(f.get('evidence_kind')))}; "
        f"{escape(evidence_text(f.get('evidence') or []))}]: {escape(str(f.get('text')))}</li>"
        for f in used(side)
    )
    return (
        f'<div class="side" data-pipeline="{pipeline}" data-verdict="{escape(str(verdict))}">'
        f"<p><b>{pipeline}</b> ({escape(str(verdict))}): {escape(str(answer))}</p>"
        f"<p>judge: {escape(str(side.get('reason') or side.get('error') or '-'))}</p>"
        f"<ul>{facts or '<li>no fact shown</li>'}</ul></div>"
    )


def section(rep: EvalReport) -> str:
    summary_rows = [
        [str(r["pipeline"]), *[fmt(r[k], kind) for k, _, kind in SUMMARY_COLUMNS]]
        for r in rep.summary
    ]
    by: dict[str, dict[str, Any]] = {}
    for r in rep.categories:
        by.setdefault(r["category"], {})[r["pipeline"]] = r
    category_rows = []
    for category in sorted(by):
        s, w = by[category].get("steward", {}), by[category].get("shadow", {})
        category_rows.append(
            [
                category,
                str(s.get("questions", w.get("questions", 0))),
                accuracy(s.get("correct", 0), s.get("questions", 0)),
                accuracy(w.get("correct", 0), w.get("questions", 0)),
            ]
        )
    disagreements = "".join(
        f'<li class="disagreement" data-question="{escape(str(d["question_id"]))}">'
        f"<p><b>{escape(str(d['question_id']))}</b> ({escape(str(d['category']))}): "
        f"{escape(str(d['question']))}<br>gold: {escape(str(d['gold']))}</p>"
        f"{_side('steward', d['steward'])}{_side('shadow', d['shadow'])}</li>"
        for d in rep.disagreements
    )
    return f"""<section id="eval">
<h2>Memory quality: ember eval run {int(rep.run["run_id"])}</h2>
<p class="note" id="eval-headline">{escape(rep.headline)}</p>
<p class="note">{escape(rep.scope)}</p>
{
        table(
            ["pipeline", *[label for _, label, _ in SUMMARY_COLUMNS]],
            summary_rows,
            set(range(1, len(SUMMARY_COLUMNS) + 1)),
            "eval-summary",
        )
    }
<p class="note">{escape(COST_NOTE)}</p>
<h3>Accuracy per question category</h3>
{
        table(
            ["category", "questions", "steward", "shadow"],
            category_rows,
            {1, 2, 3},
            "eval-categories",
        )
    }
<h3>Questions where the pipelines disagree ({len(rep.disagreements)})</h3>
<p class="note">Both answers, the judge's reasons, and the facts each answer rests on (the ones it
cited, else every one it was shown) with their evidence as the benchmark names it.</p>
<ol id="eval-disagreements">{disagreements}</ol>
</section>
"""
