"""`ember compare`: the comparison views as terminal tables, JSON or one self-contained HTML page.

Everything is read through the analyst's windowed functions on a read-only connection
(`default_transaction_read_only`), so the report can run as ember_analyst and can never write.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg
from psycopg.rows import dict_row
from rich.table import Table

from ember import queries
from ember.tables import Printer

Row = dict[str, Any]

_RELATIVE = re.compile(r"^(\d+)([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class WindowError(ValueError):
    pass


def parse_when(value: str, *, now: datetime | None = None) -> datetime:
    """`2026-11-30`, an ISO 8601 timestamp (UTC when no offset), or a span back from now: 30m,
    24h, 7d, 2w."""
    text = value.strip()
    m = _RELATIVE.match(text)
    if m:
        return (now or datetime.now(UTC)) - timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise WindowError(
            f"unknown time format {value!r} "
            "(use 2026-11-30, 2026-11-30T12:00Z, or 30m, 24h, 7d, 2w)"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@dataclass
class Report:
    since: datetime | None
    until: datetime | None
    summary: Row
    cost: list[Row]
    latency: list[Row]
    evidence_quality: list[Row]
    daily: list[Row]
    cache_misses: list[Row] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        plain: dict[str, Any] = _plain(
            {
                "window": {"since": self.since, "until": self.until},
                "summary": self.summary,
                "cost": self.cost,
                "latency": self.latency,
                "evidence_quality": self.evidence_quality,
                "daily": self.daily,
                "cache_misses": self.cache_misses,
                "notes": {
                    "coverage": "exact, evidence and semantic coverage are separate measures, "
                    "never added up; evidence neighbours are not semantic coverage; semantic "
                    "pairs are reviewable, not truth",
                    "cost": "list-price snapshot, not subscription billing; NULL when a run "
                    "lacks a price",
                },
            }
        )
        return plain


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


def read_only(url: str) -> psycopg.Connection[Row]:
    """A connection on which every transaction is read-only."""
    return psycopg.connect(
        url, options="-c default_transaction_read_only=on", row_factory=dict_row, autocommit=True
    )


def collect(
    conn: psycopg.Connection[Row], since: datetime | None, until: datetime | None
) -> Report:
    window = (since, until)
    summary = conn.execute(queries.COMPARISON_SUMMARY, window).fetchone() or {}
    return Report(
        since=since,
        until=until,
        summary=dict(summary),
        cost=list(conn.execute(queries.COMPARISON_COST, window)),
        latency=list(conn.execute(queries.COMPARISON_LATENCY, window)),
        evidence_quality=list(conn.execute(queries.COMPARISON_EVIDENCE_QUALITY, window)),
        daily=list(conn.execute(queries.COMPARISON_DAILY, window)),
        cache_misses=list(conn.execute(queries.COMPARISON_CACHE_MISSES, window)),
    )


# --- terminal ---


def fmt(value: Any, kind: str = "") -> str:
    """A figure for people: NULL stays visible as 'unknown' (a price) or '-' (no data)."""
    if value is None:
        return "unknown" if kind == "usd" else "-"
    if kind == "usd":
        return f"${Decimal(value):.4f}"
    if kind == "pct":
        return f"{float(value) * 100:.1f}%"
    if kind == "ms":
        return f"{float(value):,.0f} ms"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "none"
    return str(value)


SUMMARY_ROWS: list[tuple[str, str, str]] = [
    ("proposals", "shadow proposals", ""),
    ("valid_proposals", "valid proposals", ""),
    ("rejected_proposals", "rejected proposals", ""),
    ("rejected_by_reason", "rejected, by reason", ""),
    ("facts", "steward facts", ""),
    ("exact_covered_facts", "facts with an exact match", ""),
    ("exact_coverage", "exact coverage", "pct"),
    ("evidence_neighbour_facts", "facts with an evidence neighbour", ""),
    ("evidence_coverage", "evidence coverage (neighbours, not meaning)", "pct"),
    ("semantic_covered_facts", "facts in a judged pair", ""),
    ("semantic_coverage", "semantic coverage (reviewable, not truth)", "pct"),
    ("steward_usd", "steward cost", "usd"),
    ("shadow_usd", "shadow cost", "usd"),
    ("judge_usd", "semantic judge cost", "usd"),
    ("steward_p50_ms", "steward latency p50", "ms"),
    ("steward_p95_ms", "steward latency p95", "ms"),
    ("shadow_p50_ms", "shadow latency p50", "ms"),
    ("shadow_p95_ms", "shadow latency p95", "ms"),
]


def window_label(since: datetime | None, until: datetime | None) -> str:
    a = since.isoformat(timespec="minutes") if since else "the beginning"
    b = until.isoformat(timespec="minutes") if until else "now"
    return f"from {a} to {b}"


def print_tables(report: Report, console: Printer) -> None:
    summary = Table(title=f"Comparison summary, {window_label(report.since, report.until)}")
    summary.add_column("measure")
    summary.add_column("value", justify="right")
    for key, label, kind in SUMMARY_ROWS:
        summary.add_row(label, fmt(report.summary.get(key), kind))
    console.print(summary)

    cost = Table(title="Cost by pipeline (list-price snapshot, not subscription billing)")
    for col in (
        "pipeline",
        "model",
        "status",
        "runs",
        "input",
        "cache read",
        "write 5m",
        "write 1h",
        "output",
        "no price",
        "USD",
    ):
        cost.add_column(col, justify="left" if col in ("pipeline", "model", "status") else "right")
    for r in report.cost:
        cost.add_row(
            r["pipeline"],
            r["model"],
            r["status"],
            fmt(r["runs"]),
            fmt(r["input_tokens"]),
            fmt(r["cache_read_tokens"]),
            fmt(r["cache_write_5m_tokens"]),
            fmt(r["cache_write_1h_tokens"]),
            fmt(r["output_tokens"]),
            fmt(r["runs_without_price"]),
            fmt(r["estimated_usd"], "usd"),
        )
    if not report.cost:
        cost.add_row("no runs in this window", *[""] * 10)
    console.print(cost)

    latency = Table(title="Latency by pipeline and model")
    for col in ("pipeline", "model", "runs", "p50", "p95", "max"):
        latency.add_column(col, justify="left" if col in ("pipeline", "model") else "right")
    for r in report.latency:
        latency.add_row(
            r["pipeline"],
            r["model"],
            fmt(r["runs"]),
            fmt(r["p50_ms"], "ms"),
            fmt(r["p95_ms"], "ms"),
            fmt(r["max_ms"], "ms"),
        )
    if not report.latency:
        latency.add_row("no finished runs in this window", "", "", "", "", "")
    console.print(latency)

    quality = Table(
        title="Evidence quality (pointer identity only; correctness needs a human read)"
    )
    for col in ("source", "kind", "check", "pointers"):
        quality.add_column(col, justify="right" if col == "pointers" else "left")
    for r in report.evidence_quality:
        quality.add_row(r["source"], r["evidence_kind"], r["problem"], fmt(r["pointers"]))
    if not report.evidence_quality:
        quality.add_row("no evidence in this window", "", "", "")
    console.print(quality)
    print_cache_misses(report, console)


def cache_miss_rows(report: Report) -> list[list[str]]:
    return [
        [r["path"], r["model"], r["reason"], r["source"], fmt(r["runs"]), fmt(r["missed_tokens"])]
        for r in report.cache_misses
    ]


def print_cache_misses(report: Report, console: Printer) -> None:
    misses = Table(title="Cache misses (the API's diagnostics, or why a run went cold)")
    for col in CACHE_MISS_COLUMNS:
        misses.add_column(col, justify="right" if col in ("runs", "missed tokens") else "left")
    for row in cache_miss_rows(report):
        misses.add_row(*row)
    if not report.cache_misses:
        misses.add_row("no missed cache reads in this window", "", "", "", "", "")
    console.print(misses)


CACHE_MISS_COLUMNS = ("path", "model", "reason", "source", "runs", "missed tokens")


def to_json(report: Report) -> str:
    return json.dumps(report.as_json(), ensure_ascii=False, indent=2)
