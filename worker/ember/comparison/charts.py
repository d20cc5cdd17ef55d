"""The report's charts as inline SVG: no script, no font, nothing fetched.

Each chart says its numbers in text on the chart as well as by length, so a reader needs no
hover and a screenshot keeps everything; a measure with nothing behind it says so ("no facts",
"not judged", "unknown") instead of drawing a zero.
"""

from __future__ import annotations

from decimal import Decimal
from html import escape
from typing import Any

from ember.comparison.report import NOT_JUDGED, fmt

Row = dict[str, Any]

COLOURS = {"exact": "#1f77b4", "evidence": "#ff7f0e", "semantic": "#2ca02c"}
P50, P95, MAX = "#6baed6", "#08519c", "#c00000"
OUTPUT, REST = "#7b3294", "#c2a5cf"
KINDS = ("exact", "evidence", "semantic")


def _svg(chart_id: str, width: int, height: int, body: list[str], title: str) -> str:
    return (
        f'<svg class="chart" id="{chart_id}" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>' + "".join(body) + "</svg>"
    )


def _text(x: float, y: float, text: str, anchor: str = "start", cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.0f}" y="{y:.0f}" text-anchor="{anchor}"{c}>{escape(text)}</text>'


def _axes(left: int, top: int, width: int, height: int) -> list[str]:
    return [
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + height}" stroke="#888"/>',
        f'<line x1="{left}" y1="{top + height}" x2="{left + width}" y2="{top + height}" '
        'stroke="#888"/>',
    ]


def _legend(x: int, y: int, entries: list[tuple[str, str]], step: int = 110) -> list[str]:
    out = []
    for i, (colour, label) in enumerate(entries):
        lx = x + i * step
        out.append(
            f'<rect x="{lx}" y="{y - 10}" width="12" height="12" fill="{colour}"/>'
            + _text(lx + 16, y, label)
        )
    return out


def _pct(value: Any) -> str:
    """A share as a bar label: whole percent, short enough to sit over a bar."""
    return f"{float(value) * 100:.0f}%"


def coverage_chart(summary: Row, by_path: list[Row]) -> str:
    """Coverage by kind for all of shadow, then hot and cold: bars labelled with their share."""
    groups: list[tuple[str, Row, bool]] = [
        ("all of shadow", summary, bool(summary.get("semantic_judged_facts")))
    ]
    for row in by_path:
        if row["path"] in ("hot", "cold"):
            groups.append((f"{row['path']} path", row, bool(row.get("semantic_judged_facts"))))
    left, top, plot_h, bar_w, gap = 50, 30, 200, 34, 50
    group_w = 3 * bar_w + 12
    plot_w = len(groups) * (group_w + gap) + gap
    width, height = left + plot_w + 20, top + plot_h + 70
    body = _axes(left, top, plot_w, plot_h)
    for pct in (0, 50, 100):
        y = top + plot_h - plot_h * pct / 100
        body.append(_text(left - 6, y + 4, f"{pct}%", "end"))
        body.append(
            f'<line x1="{left}" y1="{y:.0f}" x2="{left + plot_w}" y2="{y:.0f}" stroke="#eee"/>'
        )
    for g, (label, row, judged) in enumerate(groups):
        x0 = left + gap + g * (group_w + gap)
        has_facts = bool(row.get("facts"))
        for j, kind in enumerate(KINDS):
            x = x0 + j * (bar_w + 6)
            value = row.get(f"{kind}_coverage")
            if not has_facts:
                continue
            if kind == "semantic" and not judged:
                body.append(
                    f'<text x="{x + bar_w / 2:.0f}" y="{top + plot_h - 6}" text-anchor="end" '
                    f'transform="rotate(-90 {x + bar_w / 2:.0f} {top + plot_h - 6})">'
                    f"{NOT_JUDGED}</text>"
                )
                continue
            h = plot_h * float(value or 0)
            body.append(
                f'<rect x="{x}" y="{top + plot_h - h:.1f}" width="{bar_w}" '
                f'height="{max(h, 1):.1f}" '
                f'fill="{COLOURS[kind]}"><title>{escape(label)} {kind}: {fmt(value, "pct")}'
                "</title></rect>"
            )
            body.append(_text(x + bar_w / 2, top + plot_h - h - 5, _pct(value), "middle", "small"))
        centre = x0 + group_w / 2
        if not has_facts:
            body.append(_text(centre, top + plot_h / 2, "no facts", "middle", "muted"))
        body.append(_text(centre, top + plot_h + 18, label, "middle"))
        body.append(
            _text(centre, top + plot_h + 34, f"of {fmt(row.get('facts') or 0)} facts", "middle")
        )
    body += _legend(left + 10, height - 8, [(COLOURS[k], k) for k in KINDS], 100)
    return _svg(
        "chart-coverage", width, height, body, "Coverage by kind, all of shadow and by path"
    )


def cost_chart(summary: Row, by_path: list[Row]) -> str:
    """List-price USD per path, the output tokens' part drawn apart and its share written."""
    rows: list[tuple[str, Any, Any]] = [
        (
            r["path"] + (" path" if r["path"] != "steward" else ""),
            r["estimated_usd"],
            r["output_usd"],
        )
        for r in by_path
    ]
    if summary.get("judge_runs"):
        rows.append(("semantic judge", summary.get("judge_usd"), None))
    left, top, bar_h, plot_w = 120, 10, 24, 380
    width, height = left + plot_w + 260, top + max(1, len(rows)) * (bar_h + 12) + 36
    body = _axes(left, top, plot_w, height - top - 36)
    known = [Decimal(usd) for _, usd, _ in rows if usd is not None]
    scale = float(max(known)) if known and max(known) > 0 else 1.0
    if not rows:
        body.append(_text(left + 20, top + 20, "no runs in this window"))
    for i, (label, usd, out) in enumerate(rows):
        y = top + i * (bar_h + 12)
        body.append(_text(left - 8, y + bar_h * 0.7, label, "end"))
        if usd is None:
            body.append(_text(left + 6, y + bar_h * 0.7, "unknown: a run lacks a price"))
            continue
        w = plot_w * float(usd) / scale
        wo = plot_w * float(out) / scale if out is not None else 0
        body.append(
            f'<rect x="{left}" y="{y}" width="{max(w - wo, 0):.1f}" height="{bar_h}" '
            f'fill="{REST}"/>'
        )
        if out is not None:
            body.append(
                f'<rect x="{left + w - wo:.1f}" y="{y}" width="{wo:.1f}" height="{bar_h}" '
                f'fill="{OUTPUT}"/>'
            )
        share = f" · output {float(out) / float(usd) * 100:.0f}%" if out is not None and usd else ""
        body.append(_text(left + max(w, 1) + 6, y + bar_h * 0.7, fmt(usd, "usd") + share))
    body += _legend(left, height - 10, [(REST, "input and cache"), (OUTPUT, "output")], 130)
    return _svg("chart-cost", width, height, body, "List-price USD by path, output apart")


def latency_chart(latency: list[Row]) -> str:
    """p50 and p95 bars per pipeline and model, the max as a tick; all three written after it."""
    left, top, bar_h, plot_w = 270, 10, 12, 360
    rows = latency
    width, height = left + plot_w + 260, top + max(1, len(rows)) * (2 * bar_h + 14) + 30
    body = _axes(left, top, plot_w, height - top - 30)
    scale = max((float(r["max_ms"]) for r in rows if r["max_ms"] is not None), default=1.0) or 1.0
    if not rows:
        body.append(_text(left + 20, top + 20, "no finished runs in this window"))
    for i, r in enumerate(rows):
        y = top + i * (2 * bar_h + 14)
        body.append(_text(left - 8, y + bar_h + 4, f"{r['pipeline']} · {r['model']}", "end"))
        for j, (key, colour) in enumerate((("p50_ms", P50), ("p95_ms", P95))):
            w = plot_w * float(r[key]) / scale
            body.append(
                f'<rect x="{left}" y="{y + j * bar_h}" width="{max(w, 1):.1f}" '
                f'height="{bar_h - 1}" fill="{colour}"/>'
            )
        mx = left + plot_w * float(r["max_ms"]) / scale
        body.append(
            f'<line x1="{mx:.1f}" y1="{y - 2}" x2="{mx:.1f}" y2="{y + 2 * bar_h + 2}" '
            f'stroke="{MAX}" stroke-width="2"/>'
        )
        label = (
            f"p50 {fmt(r['p50_ms'], 'ms')} · p95 {fmt(r['p95_ms'], 'ms')} · "
            f"max {fmt(r['max_ms'], 'ms')}"
        )
        body.append(_text(mx + 8, y + bar_h + 4, label, cls="small"))
    body += _legend(left, height - 8, [(P50, "p50"), (P95, "p95"), (MAX, "max")], 70)
    return _svg("chart-latency", width, height, body, "Latency by pipeline and model")


def daily_chart(daily: list[Row]) -> str:
    """Coverage by kind per UTC day; only drawn when the window holds several days."""
    left, top, plot_h = 50, 20, 200
    per_day = 3 * 12 + 18
    plot_w = max(300, per_day * len(daily))
    width, height = left + plot_w + 20, top + plot_h + 56
    body = _axes(left, top, plot_w, plot_h)
    for pct in (0, 50, 100):
        y = top + plot_h - plot_h * pct / 100
        body.append(_text(left - 6, y + 4, f"{pct}%", "end"))
    step = max(1, len(daily) // 12)
    for i, day in enumerate(daily):
        x0 = left + 8 + i * per_day
        for j, kind in enumerate(KINDS):
            value = day.get(f"{kind}_coverage")
            if value is None:
                continue
            h = plot_h * float(value)
            body.append(
                f'<rect x="{x0 + j * 12}" y="{top + plot_h - h:.1f}" width="10" '
                f'height="{max(h, 1):.1f}" fill="{COLOURS[kind]}"><title>{day["day"]} {kind}: '
                f"{fmt(value, 'pct')}</title></rect>"
            )
        if i % step == 0:
            body.append(_text(x0, top + plot_h + 16, str(day["day"])[5:]))
            body.append(
                _text(x0, top + plot_h + 30, f"{fmt(day.get('facts') or 0)} f", cls="small")
            )
    body += _legend(left + 10, height - 6, [(COLOURS[k], k) for k in KINDS], 100)
    return _svg("chart-daily", width, height, body, "Coverage by kind per UTC day")
