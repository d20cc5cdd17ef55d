"""The report as one self-contained HTML page: inline CSS and inline SVG charts, no script, no
font, image or stylesheet from anywhere (a Content-Security-Policy of default-src 'none' says so
to the browser too), so it opens offline and can be mailed as a single file.

Every summary number is a link to the drill-down section listing the rows behind it; every
per-thread count links to that thread's rows in its section. Links are fragment anchors only,
and every id on the page is made here (t1, t2 ... for threads), never from content: thread ids,
texts and evidence are untrusted and only ever appear escaped, as text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import Any

from ember.comparison.charts import cost_chart, coverage_chart, daily_chart, latency_chart
from ember.comparison.report import (
    CACHE_MISS_COLUMNS,
    COST_COLUMNS,
    COST_TEXT_COLUMNS,
    LATENCY_COLUMNS,
    LATENCY_TEXT_COLUMNS,
    NOT_JUDGED,
    PATH_ROWS,
    QUALITY_COLUMNS,
    QUALITY_TEXT_COLUMNS,
    REVIEW_COLUMNS,
    SECTIONS,
    SUMMARY_ROWS,
    Report,
    Row,
    Section,
    absolute_window,
    cache_miss_rows,
    cost_rows,
    excluded_line,
    fmt,
    latency_rows,
    path_figure,
    quality_rows,
    review_rows,
    summary_figure,
    window_label,
)

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; background: #fff; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 0; }
section { margin: 2em 0; padding: .5em 0; }
section:target { outline: 3px solid #08519c; outline-offset: 6px; }
tbody:target td { background: #fff3bf; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border-bottom: 1px solid #ddd; padding: .25em .6em; text-align: left; }
th, td { vertical-align: top; }
thead th { background: #f4f4f4; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.text { max-width: 30em; white-space: pre-wrap; overflow-wrap: anywhere; }
.note, .frame { color: #555; max-width: 70em; }
.frame b { color: #222; }
nav a { margin-right: .8em; }
a { color: #08519c; }
ul.ev { margin: .3em 0 0; padding-left: 1.2em; font-size: 12px; color: #444; }
ul.ev code { white-space: pre-wrap; overflow-wrap: anywhere; }
.tag { font-size: 11px; color: #7a4b00; background: #fdf0d5; padding: 0 .3em; }
.muted { color: #888; fill: #888; }
code.explain { font-size: 12px; }
svg.chart { display: block; margin: .5em 0 1em; }
svg text { font: 12px system-ui, sans-serif; fill: #333; }
svg text.small { font-size: 11px; }
"""


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    numeric: set[int],
    table_id: str | None = None,
) -> str:
    """A table of plain text cells (each escaped here); the columns in `numeric` align right."""
    head = "".join(
        f'<th class="num">{escape(h)}</th>' if i in numeric else f"<th>{escape(h)}</th>"
        for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{escape(c)}</td>' if i in numeric else f"<td>{escape(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    ident = f' id="{escape(table_id)}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _numbers(columns: Sequence[str], text_columns: int) -> set[int]:
    """The numeric columns of a table whose first `text_columns` are text."""
    return set(range(text_columns, len(columns)))


def _raw(value: Any) -> str:
    """The machine form of a figure for data-value: '' for NULL."""
    if value is None:
        return ""
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def _link(target: str, text: str) -> str:
    return f'<a href="#{target}">{escape(text)}</a>'


class Page:
    """One report's page: the thread anchors it made, and its parts."""

    def __init__(self, report: Report) -> None:
        self.report = report
        names = {r["thread_id"] for r in report.by_thread}
        for section in report.sections.values():
            names.update(r["thread_id"] for r in section.shown if r.get("thread_id"))
        self.thread_ids = {name: f"t{i}" for i, name in enumerate(sorted(names), 1)}
        # The thread groups each section shows, as "<section>-<tN>".
        self.groups: set[str] = set()

    # --- evidence and items ---

    def evidence(self, pointers: list[Row]) -> str:
        if not pointers:
            return ""
        items = []
        for p in pointers:
            tags = ""
            if p.get("unread_reason"):
                tags += f' <span class="tag">{escape(p["unread_reason"])}</span>'
            if p.get("forgotten"):
                tags += ' <span class="tag">forgotten</span>'
            if p.get("malformed") is not None:
                body = f"malformed pointer <code>{escape(p['malformed'])}</code>"
            elif not p.get("target_found"):
                name = (
                    f"m:{p['message_id']}"
                    if p.get("message_id") is not None
                    else f"generation {p.get('generation_id')}"
                )
                body = f"{escape(name)}: names no row"
            elif p.get("isolated"):
                body = '<span class="muted">a row of an isolated thread: never shown</span>'
            else:
                body = f"<code>{escape(p.get('excerpt') or '')}</code>"
            items.append(f"<li>{body}{tags}</li>")
        return f'<ul class="ev">{"".join(items)}</ul>'

    @staticmethod
    def explain(item: str, item_id: int) -> str:
        command = (
            f"ember explain {item_id}" if item == "fact" else f"ember explain --proposal {item_id}"
        )
        return f'<code class="explain">{escape(command)}</code>'

    def item_cell(self, row: Row) -> str:
        label = "fact" if row["item"] == "fact" else "proposal"
        text = row.get("text")
        shown = escape(text) if text is not None else '<span class="muted">(text forgotten)</span>'
        return (
            f'<td class="text"><b>{label} {row["item_id"]}</b> {shown}'
            f"{self.evidence(row.get('evidence_rows') or [])}</td>"
        )

    def paired_cell(self, row: Row, kind: str | None) -> str:
        partners = [p for p in row.get("paired") or [] if kind is None or kind in p["kinds"]]
        if not partners:
            return '<td class="muted">none</td>'
        parts = []
        for p in partners:
            text = escape(p["text"]) if p.get("text") is not None else "(text forgotten)"
            via = f" ({', '.join(p['kinds'])})" if kind is None else ""
            where = (
                f" · {escape(p['thread_id'])}" if p.get("thread_id") != row.get("thread_id") else ""
            )
            path = f" · {escape(p['path'])}" if p.get("path") and p["item"] == "proposal" else ""
            parts.append(
                f"<div><b>{p['item']} {p['item_id']}</b>{path}{where}{via} {text}"
                f"{self.evidence(p.get('evidence_rows') or [])} "
                f"{self.explain(p['item'], p['item_id'])}</div>"
            )
        return f'<td class="text">{"".join(parts)}</td>'

    # --- the drill-down sections ---

    def _columns(self, key: str) -> list[str]:
        if key in ("exact", "evidence", "semantic"):
            return ["thread", "steward fact and its evidence", "proposals it pairs with", "explain"]
        if key == "facts":
            return [
                "thread",
                "fact and its evidence",
                "exact",
                "evidence",
                "semantic",
                "read by",
                "explain",
            ]
        if key == "proposals":
            return [
                "thread",
                "path",
                "proposal and its evidence",
                "status",
                "exact",
                "evidence",
                "semantic",
                "explain",
            ]
        if key == "steward-only":
            return ["thread", "fact and its evidence", "read by shadow", "explain"]
        if key == "shadow-only":
            return ["thread", "path", "proposal and its evidence", "explain"]
        if key == "rejected":
            return ["thread", "path", "proposal and its evidence", "reason", "explain"]
        if key == "excluded":
            return ["thread", "fact and its evidence", "why shadow could not read it", "explain"]
        return []

    def _row(self, key: str, row: Row) -> str:
        thread = f"<td>{escape(row['thread_id'])}</td>"
        explain = f"<td>{self.explain(row['item'], row['item_id'])}</td>"
        read_by = ", ".join(row.get("read_by_shadow") or []) or "not yet"
        cells: list[str]
        if key in ("exact", "evidence", "semantic"):
            cells = [thread, self.item_cell(row), self.paired_cell(row, key), explain]
        elif key == "facts":
            cells = [
                thread,
                self.item_cell(row),
                f"<td>{escape(row['exact'])}</td>",
                f"<td>{escape(row['evidence'])}</td>",
                f"<td>{escape(row['semantic'])}</td>",
                f"<td>{escape(read_by)}</td>",
                explain,
            ]
        elif key == "proposals":
            cells = [
                thread,
                f"<td>{escape(row['path'])}</td>",
                self.item_cell(row),
                f"<td>{escape(row['status'])}</td>",
                f"<td>{escape(row['exact'])}</td>",
                f"<td>{escape(row['evidence'])}</td>",
                f"<td>{escape(row['semantic'])}</td>",
                explain,
            ]
        elif key == "steward-only":
            cells = [thread, self.item_cell(row), f"<td>{escape(read_by)}</td>", explain]
        elif key == "shadow-only":
            cells = [thread, f"<td>{escape(row['path'])}</td>", self.item_cell(row), explain]
        elif key == "rejected":
            cells = [
                thread,
                f"<td>{escape(row['path'])}</td>",
                self.item_cell(row),
                f'<td class="text">{escape(row.get("rejection") or "")}</td>',
                explain,
            ]
        else:
            cells = [
                thread,
                self.item_cell(row),
                f"<td>{escape(row.get('excluded_reason') or '')}</td>",
                explain,
            ]
        return (
            f'<tr data-item="{row["item"]}" data-id="{row["item_id"]}">' + "".join(cells) + "</tr>"
        )

    def runs_table(self, section: Section) -> str:
        headers = [
            "pipeline", "run", "thread", "model", "status", "started", "latency", "input",
            "cache read", "cache write", "output", "digested", "written", "USD", "output USD",
            "predicted input USD", "other path USD",
        ]  # fmt: skip
        numeric = {1, *range(6, 17)}
        head = "".join(
            f'<th class="num">{escape(h)}</th>' if i in numeric else f"<th>{escape(h)}</th>"
            for i, h in enumerate(headers)
        )
        bodies = []
        for path in ("hot", "cold", "steward", "judge"):
            rows = [r for r in section.shown if r["path"] == path]
            if not rows:
                continue
            trs = []
            for r in rows:
                written = r["facts_written"] if r["path"] == "steward" else r["proposals_written"]
                # Only a shadow claim predicts: blank for the steward and the judge.
                shadow = r["path"] in ("hot", "cold")
                cells = [
                    r["pipeline"], str(r["run_id"]), r["thread_id"] or "", r["model"], r["status"],
                    r["started_at"].strftime("%Y-%m-%d %H:%M:%S") if r["started_at"] else "",
                    fmt(r["latency_ms"], "ms"), fmt(r["input_tokens"]), fmt(r["cache_read_tokens"]),
                    fmt(r["cache_write_5m_tokens"] + r["cache_write_1h_tokens"]),
                    fmt(r["output_tokens"]), fmt(r["messages_digested"]),
                    "" if written is None else fmt(written),
                    fmt(r["estimated_usd"], "usd"), fmt(r["output_usd"], "usd"),
                    fmt(r["predicted_input_usd"], "usd") if shadow else "",
                    fmt(r["predicted_other_path_usd"], "usd") if shadow else "",
                ]  # fmt: skip
                trs.append(
                    f'<tr data-run="{r["run_id"]}">'
                    + "".join(
                        f'<td class="num">{escape(c)}</td>'
                        if i in numeric
                        else f"<td>{escape(c)}</td>"
                        for i, c in enumerate(cells)
                    )
                    + "</tr>"
                )
            self.groups.add(f"runs-{path}")
            bodies.append(f'<tbody id="runs-{path}">{"".join(trs)}</tbody>')
        return f"<table><thead><tr>{head}</tr></thead>{''.join(bodies)}</table>"

    def section(self, section: Section) -> str:
        spec = section.spec
        key = spec.key
        shown, total = len(section.shown), len(section.rows)
        unit = (
            "runs"
            if key == "runs"
            else (
                "proposals" if "proposal" in key or key in ("shadow-only", "rejected") else "facts"
            )
        )
        count = f"{fmt(section.count)} {unit}"
        if key != "runs" and total != section.count:
            count += f" in {fmt(total)} rows (a fact citing several threads has a row for each)"
        head = (
            f'<section id="sec-{key}" class="drill"><h2>{escape(spec.title)}: {escape(count)}</h2>'
            f'<p class="note">{escape(spec.note)} In psql: <code>{escape(section.query)}</code></p>'
        )
        if key == "semantic" and not self.report.judged:
            head += (
                f'<p class="note"><b>{NOT_JUDGED}</b>: no fact of this window has been shown to '
                "a judge (<code>ember compare --semantic</code>).</p>"
            )
        if shown < total:
            head += (
                f'<p class="note">Showing the first {fmt(shown)} of {fmt(total)} rows '
                "(<code>--rows N</code> shows more); the query above lists them all.</p>"
            )
        if not section.shown:
            return head + '<p class="muted">none in this window</p></section>'
        if key == "runs":
            return head + self.runs_table(section) + "</section>"
        headers = self._columns(key)
        thead = "".join(f"<th>{escape(h)}</th>" for h in headers)
        bodies = []
        for name in sorted({r["thread_id"] for r in section.shown}):
            tid = self.thread_ids[name]
            rows = "".join(self._row(key, r) for r in section.shown if r["thread_id"] == name)
            self.groups.add(f"{key}-{tid}")
            bodies.append(f'<tbody id="{key}-{tid}">{rows}</tbody>')
        return head + f"<table><thead><tr>{thead}</tr></thead>{''.join(bodies)}</table></section>"

    # --- the overview ---

    def summary(self) -> str:
        s = self.report.summary
        rows = []
        for key, label, kind, target in SUMMARY_ROWS:
            shown = summary_figure(s, key, kind)
            value = _link(f"sec-{target}", shown) if target else escape(shown)
            rows.append(
                f'<tr><th>{escape(label)}</th><td class="num" data-key="{key}" '
                f'data-value="{escape(_raw(s.get(key)))}">{value}</td></tr>'
            )
        return f'<table id="summary">{"".join(rows)}</table>'

    def paths(self) -> str:
        by_path = self.report.by_path
        head = "<th>measure</th>" + "".join(
            f'<th class="num">{escape(r["path"])}</th>' for r in by_path
        )
        rows = []
        for key, label, kind in PATH_ROWS:
            cells = []
            for r in by_path:
                shown = path_figure(r, key, kind)
                if key in ("runs", "completed_runs", "estimated_usd", "p50_ms", "p95_ms", "max_ms"):
                    target = f"runs-{r['path']}"
                    shown_html = _link(target, shown) if r.get("runs") else escape(shown)
                elif key == "proposals" and r["path"] != "steward" and r.get("proposals"):
                    shown_html = _link("sec-proposals", shown)
                elif key == "facts" and r.get("facts"):
                    shown_html = _link("sec-facts", shown)
                else:
                    shown_html = escape(shown)
                cells.append(
                    f'<td class="num" data-path="{escape(r["path"])}" data-measure="{key}" '
                    f'data-value="{escape(_raw(r.get(key)))}">{shown_html}</td>'
                )
            rows.append(f"<tr><th>{escape(label)}</th>{''.join(cells)}</tr>")
        body = "".join(rows)
        return f'<table id="paths"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'

    def threads(self) -> str:
        columns = [
            ("proposals", "proposals", None),
            ("rejected_proposals", "rejected", "rejected"),
            ("hot_proposals", "hot", None),
            ("cold_proposals", "cold", None),
            ("facts", "facts", "facts"),
            ("excluded_facts", "excluded", "excluded"),
            ("exact_covered_facts", "exact", "exact"),
            ("evidence_neighbour_facts", "neighbours", "evidence"),
            ("semantic_covered_facts", "semantic", "semantic"),
            ("steward_only_facts", "steward only", "steward-only"),
            ("shadow_only_proposals", "shadow only", "shadow-only"),
            ("shadow_usd", "shadow USD", None),
        ]
        head = "<th>thread</th>" + "".join(f'<th class="num">{escape(c[1])}</th>' for c in columns)
        rows = []
        for r in self.report.by_thread:
            tid = self.thread_ids[r["thread_id"]]
            cells = [f"<th>{escape(r['thread_id'])}</th>"]
            for key, _, target in columns:
                value = r.get(key)
                if key == "semantic_covered_facts" and not self.report.judged:
                    shown = NOT_JUDGED
                else:
                    shown = fmt(value, "usd" if key == "shadow_usd" else "")
                group = f"{target}-{tid}" if target else None
                html = _link(group, shown) if value and group in self.groups else escape(shown)
                cells.append(f'<td class="num" data-thread="{tid}" data-column="{key}">{html}</td>')
            rows.append(f"<tr>{''.join(cells)}</tr>")
        if not rows:
            rows.append('<tr><td class="muted">no thread in this window</td></tr>')
        body = "".join(rows)
        return f'<table id="threads"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def render(report: Report, sections: Sequence[str] = ()) -> str:
    """The page; `sections` are fragments other reports render (ember eval's), placed last."""
    page = Page(report)
    # The drill-downs first, so the overview knows which thread groups exist to link to.
    drill = "".join(
        page.section(report.sections[s.key]) for s in SECTIONS if s.key in report.sections
    )
    ctx = report.context
    window = window_label(report.since, report.until)
    generated = ctx.get("generated_at")
    cost_table = table(COST_COLUMNS, cost_rows(report), _numbers(COST_COLUMNS, COST_TEXT_COLUMNS))
    latency_table = table(
        LATENCY_COLUMNS, latency_rows(report), _numbers(LATENCY_COLUMNS, LATENCY_TEXT_COLUMNS)
    )
    quality_table = table(
        QUALITY_COLUMNS, quality_rows(report), _numbers(QUALITY_COLUMNS, QUALITY_TEXT_COLUMNS)
    )
    if len(report.daily) >= 2:
        over_time = daily_chart(report.daily)
    elif report.daily:
        over_time = (
            '<p class="note">Everything in this window is of one UTC day '
            f"({escape(str(report.daily[0]['day']))}): "
            "a per-day chart would be one bar group, so there is none; the summary is that day.</p>"
        )
    else:
        over_time = '<p class="note">No proposal or fact in this window.</p>'
    nav = "".join(
        _link(f"sec-{k}", t)
        for k, t in [("summary", "summary"), ("paths", "hot vs cold"), ("threads", "per thread"),
                     ("cost", "cost"), ("latency", "latency"), ("quality", "evidence quality"),
                     ("cache", "cache misses")]
        + [(s.key, s.title.lower()) for s in SECTIONS]
    )  # fmt: skip
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>Ember comparison, {escape(str(ctx.get("database_name", "")))}, {
        escape(absolute_window(report))
    }</title>
<style>{CSS}</style>
</head>
<body>
<header id="sec-top">
<h1>Shadow vs steward</h1>
<p class="frame" id="frame">Database <b>{escape(str(ctx.get("database_name", "?")))}</b> · window
<b>{escape(absolute_window(report))}</b> (asked: {escape(window)}) · generated
<b>{escape(generated.strftime("%Y-%m-%d %H:%M:%S %Z") if generated else "?")}</b></p>
<p class="note">Exact, evidence and semantic coverage are separate measures and are never added up.
Evidence neighbours share a pointer, which is not coverage of meaning; semantic pairs are a
light model's judgement, reviewable, not truth. Every number links to the rows behind it; each
item has its explain command.</p>
<p class="note" id="denominator">{escape(excluded_line(report.summary))} {
        _link("sec-excluded", "The facts left out.")
    }</p>
<nav>{nav}</nav>
</header>
<section id="sec-summary"><h2>Summary</h2>{page.summary()}</section>
<section id="sec-paths"><h2>Hot vs cold, beside the steward</h2>
<p class="note">A shadow path's coverage is of the facts whose rows that path's completed runs read;
output share is the output tokens' part of the cost, the column to watch on the hot path, which pays
output at the thread's own model's price. Cost per fact: per fact the steward wrote, per valid
proposal for shadow.</p>
{page.paths()}
{coverage_chart(report.summary, report.by_path)}
{cost_chart(report.summary, report.by_path)}
</section>
<section id="sec-threads"><h2>Per thread</h2>
<p class="note">Each count links to that thread's rows in its section. A fact citing several
threads counts in each.</p>
{page.threads()}
</section>
<section id="sec-time"><h2>Over time</h2>{over_time}</section>
<section id="sec-cost"><h2>Cost by pipeline</h2>
<p class="note">A list-price snapshot, not subscription billing. A pipeline with a run that lacks
a price shows "unknown", never a smaller total.</p>
{cost_table}
</section>
<section id="sec-latency"><h2>Latency</h2>
{latency_chart(report.latency)}
{latency_table}
</section>
<section id="sec-quality"><h2>Evidence quality</h2>
<p class="note">Pointer identity checks only; whether a fact is correct still needs a human
read.</p>
{quality_table}
</section>
<section id="sec-cache"><h2>Cache misses</h2>
<p class="note">Why shadow runs did not read the prompt cache: the API's cache diagnostics
where a hot run asked for them, or why a run went cold.</p>
{table(CACHE_MISS_COLUMNS, cache_miss_rows(report), {4, 5})}
</section>
<section id="sec-review"><h2>Review queue</h2>
<p class="note">What the consolidation job left to a person: contradictions it flagged, and
merges, supersedes and retirements below its confidence threshold. Decide with
ember.review_consolidation_action(action, accept or reject, who).</p>
{table(REVIEW_COLUMNS, review_rows(report), {0, 2})}
</section>
{drill}
{"".join(sections)}
</body>
</html>
"""
