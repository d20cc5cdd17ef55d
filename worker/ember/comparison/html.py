"""The report as one self-contained HTML page: inline CSS and inline SVG charts, no script, no
font, image or stylesheet from anywhere (a Content-Security-Policy of default-src 'none' says so
to the browser too), so it opens offline and can be mailed as a single file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import Decimal
from html import escape
from typing import Any

from ember.comparison.report import (
    CACHE_MISS_COLUMNS,
    SUMMARY_ROWS,
    Report,
    cache_miss_rows,
    fmt,
    window_label,
)

COLOURS = {"exact": "#1f77b4", "evidence": "#ff7f0e", "semantic": "#2ca02c"}
P50, P95 = "#6baed6", "#08519c"
BAR = "#9467bd"

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; background: #fff; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border-bottom: 1px solid #ddd; padding: .25em .75em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.note { color: #555; max-width: 60em; }
svg.chart { display: block; margin: .5em 0; }
svg text { font: 12px system-ui, sans-serif; fill: #333; }
"""


def _svg(chart_id: str, width: int, height: int, body: list[str], title: str) -> str:
    return (
        f'<svg class="chart" id="{chart_id}" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>' + "".join(body) + "</svg>"
    )


def _axes(left: int, top: int, width: int, height: int) -> list[str]:
    return [
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + height}" stroke="#888"/>',
        f'<line x1="{left}" y1="{top + height}" x2="{left + width}" y2="{top + height}" '
        'stroke="#888"/>',
    ]


def _no_data(x: int, y: int) -> str:
    return f'<text x="{x}" y="{y}">no data in this window</text>'


def coverage_chart(daily: list[dict[str, Any]]) -> str:
    """Coverage by kind over time: per day, three bars (exact, evidence, semantic), 0-100%."""
    left, top, plot_h = 50, 20, 200
    per_day = 3 * 12 + 14
    plot_w = max(300, per_day * len(daily))
    width, height = left + plot_w + 140, top + plot_h + 50
    body = _axes(left, top, plot_w, plot_h)
    for pct in (0, 50, 100):
        y = top + plot_h - plot_h * pct / 100
        body.append(f'<text x="{left - 6}" y="{y + 4:.0f}" text-anchor="end">{pct}%</text>')
    if not daily:
        body.append(_no_data(left + 20, top + plot_h // 2))
    for i, day in enumerate(daily):
        x0 = left + 8 + i * per_day
        for j, kind in enumerate(("exact", "evidence", "semantic")):
            value = day.get(f"{kind}_coverage")
            h = plot_h * float(value) if value is not None else 0
            body.append(
                f'<rect x="{x0 + j * 12}" y="{top + plot_h - h:.1f}" width="10" height="{h:.1f}" '
                f'fill="{COLOURS[kind]}"><title>{day["day"]} {kind}: {fmt(value, "pct")}'
                "</title></rect>"
            )
        if len(daily) <= 14 or i % max(1, len(daily) // 10) == 0:
            body.append(
                f'<text x="{x0}" y="{top + plot_h + 16}">{escape(str(day["day"])[5:])}</text>'
            )
    for j, kind in enumerate(("exact", "evidence", "semantic")):
        y = top + 10 + j * 20
        body.append(
            f'<rect x="{left + plot_w + 16}" y="{y - 9}" width="12" height="12" '
            f'fill="{COLOURS[kind]}"/><text x="{left + plot_w + 34}" y="{y + 1}">{kind}</text>'
        )
    return _svg("chart-coverage", width, height, body, "Coverage by kind over time")


def cost_chart(cost: list[dict[str, Any]]) -> str:
    """Estimated USD by pipeline; a pipeline with an unpriced run shows 'unknown', no bar."""
    totals: dict[str, Decimal | None] = {}
    for r in cost:
        usd = r["estimated_usd"]
        prev = totals.get(r["pipeline"], Decimal(0))
        totals[r["pipeline"]] = None if usd is None or prev is None else prev + Decimal(usd)
    left, top, bar_h, plot_w = 130, 10, 24, 400
    width, height = left + plot_w + 120, top + max(1, len(totals)) * (bar_h + 10) + 20
    body = _axes(left, top, plot_w, height - top - 20)
    known = [v for v in totals.values() if v is not None]
    scale = float(max(known)) if known and max(known) > 0 else 1.0
    if not totals:
        body.append(_no_data(left + 20, top + 20))
    for i, (pipeline, usd) in enumerate(sorted(totals.items())):
        y = top + i * (bar_h + 10)
        body.append(
            f'<text x="{left - 8}" y="{y + bar_h * 0.7:.0f}" text-anchor="end">'
            f"{escape(pipeline)}</text>"
        )
        w = plot_w * float(usd) / scale if usd is not None else 0
        body.append(
            f'<rect x="{left}" y="{y}" width="{max(w, 1 if usd is not None else 0):.1f}" '
            f'height="{bar_h}" fill="{BAR}"/>'
        )
        body.append(
            f'<text x="{left + w + 6:.0f}" y="{y + bar_h * 0.7:.0f}">{fmt(usd, "usd")}</text>'
        )
    return _svg("chart-cost", width, height, body, "Estimated list-price USD by pipeline")


def latency_chart(latency: list[dict[str, Any]]) -> str:
    """Latency distribution per pipeline and model: p50 and p95 bars, max as a tick."""
    left, top, bar_h, plot_w = 260, 10, 12, 400
    rows = latency
    width, height = left + plot_w + 200, top + max(1, len(rows)) * (2 * bar_h + 14) + 30
    body = _axes(left, top, plot_w, height - top - 30)
    scale = max((float(r["max_ms"]) for r in rows if r["max_ms"] is not None), default=1.0) or 1.0
    if not rows:
        body.append(_no_data(left + 20, top + 20))
    for i, r in enumerate(rows):
        y = top + i * (2 * bar_h + 14)
        label = f"{r['pipeline']} · {r['model']}"
        body.append(
            f'<text x="{left - 8}" y="{y + bar_h + 4}" text-anchor="end">{escape(label)}</text>'
        )
        for j, (key, colour) in enumerate((("p50_ms", P50), ("p95_ms", P95))):
            w = plot_w * float(r[key]) / scale
            body.append(
                f'<rect x="{left}" y="{y + j * bar_h}" width="{max(w, 1):.1f}" '
                f'height="{bar_h - 1}" '
                f'fill="{colour}"><title>{key[:3]}: {fmt(r[key], "ms")}</title></rect>'
            )
        mx = left + plot_w * float(r["max_ms"]) / scale
        body.append(
            f'<line x1="{mx:.1f}" y1="{y}" x2="{mx:.1f}" y2="{y + 2 * bar_h}" stroke="#c00" '
            f'stroke-width="2"/><text x="{mx + 6:.0f}" y="{y + bar_h + 4}">'
            f"{fmt(r['p50_ms'], 'ms')} / {fmt(r['p95_ms'], 'ms')}</text>"
        )
    y = height - 10
    body.append(
        f'<rect x="{left}" y="{y - 9}" width="12" height="10" fill="{P50}"/>'
        f'<text x="{left + 16}" y="{y}">p50</text>'
        f'<rect x="{left + 60}" y="{y - 9}" width="12" height="10" fill="{P95}"/>'
        f'<text x="{left + 76}" y="{y}">p95</text>'
        f'<line x1="{left + 124}" y1="{y - 9}" x2="{left + 124}" y2="{y + 1}" stroke="#c00" '
        f'stroke-width="2"/><text x="{left + 130}" y="{y}">max</text>'
    )
    return _svg("chart-latency", width, height, body, "Latency by pipeline and model")


def _table(headers: list[str], rows: list[list[str]], numeric: set[int]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{escape(c)}</td>' if i in numeric else f"<td>{escape(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render(report: Report, sections: Sequence[str] = ()) -> str:
    """The page; `sections` are fragments other reports render (ember eval's), placed last."""
    window = window_label(report.since, report.until)
    summary_rows = "".join(
        f'<tr><th>{escape(label)}</th><td class="num" data-key="{key}" '
        f'data-value="{escape(_raw(report.summary.get(key)))}">'
        f"{escape(fmt(report.summary.get(key), kind))}</td></tr>"
        for key, label, kind in SUMMARY_ROWS
    )
    cost_rows = [
        [
            r["pipeline"],
            r["model"],
            r["status"],
            fmt(r["runs"]),
            fmt(r["input_tokens"]),
            fmt(r["cache_read_tokens"]),
            fmt(r["cache_write_5m_tokens"]),
            fmt(r["cache_write_1h_tokens"]),
            fmt(r["output_tokens"]),
            fmt(r["estimated_usd"], "usd"),
        ]
        for r in report.cost
    ]
    quality_rows = [
        [r["source"], r["evidence_kind"], r["problem"], fmt(r["pointers"])]
        for r in report.evidence_quality
    ]
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>Ember comparison, {escape(window)}</title>
<style>{CSS}</style>
</head>
<body>
<h1>Shadow vs steward, {escape(window)}</h1>
<p class="note">Exact, evidence and semantic coverage are separate measures and are never added up.
Evidence neighbours share a pointer, which is not coverage of meaning; semantic pairs are a
light model's judgement, reviewable, not truth.</p>
<h2>Summary</h2>
<table id="summary">{summary_rows}</table>
<h2>Coverage by kind over time</h2>
{coverage_chart(report.daily)}
<h2>Cost by pipeline</h2>
<p class="note">A list-price snapshot, not subscription billing. A pipeline with a run that lacks
a price shows "unknown", never a smaller total.</p>
{cost_chart(report.cost)}
{
        _table(
            [
                "pipeline",
                "model",
                "status",
                "runs",
                "input",
                "cache read",
                "write 5m",
                "write 1h",
                "output",
                "USD",
            ],
            cost_rows,
            {3, 4, 5, 6, 7, 8, 9},
        )
    }
<h2>Latency</h2>
{latency_chart(report.latency)}
<h2>Evidence quality</h2>
<p class="note">Pointer identity checks only; whether a fact is correct still needs a human
read.</p>
{_table(["source", "kind", "check", "pointers"], quality_rows, {3})}
<h2>Cache misses</h2>
<p class="note">Why shadow runs did not read the prompt cache: the API's cache diagnostics
where a hot run asked for them, or why a run went cold.</p>
{_table(list(CACHE_MISS_COLUMNS), cache_miss_rows(report), {4, 5})}
{"".join(sections)}
</body>
</html>
"""


def _raw(value: Any) -> str:
    """The machine form of a figure for data-value: '' for NULL."""
    if value is None:
        return ""
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)
