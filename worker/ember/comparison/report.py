"""`ember compare`: the comparison views as terminal tables, JSON or one self-contained HTML page.

Everything is read through the analyst's windowed functions on a read-only connection
(`default_transaction_read_only`), so the report can run as ember_analyst and can never write.
Every figure comes from SQL (functions/06*.sql); this module only chooses which rows to show and
lays them out, so a number in the report and the rows listed under it are the same rows an
analyst gets in psql from the query each section names.
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

# Rows shown per drill-down section; the section says how many there are and the SQL for all.
DEFAULT_ROWS = 200


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


@dataclass(frozen=True)
class SectionSpec:
    key: str
    title: str
    # What the rows are, in one sentence for the page.
    note: str
    # The psql query for every row of the section; {w} is the window's arguments.
    query: str


# The drill-down sections, in page order. Each summary number links to one of them.
SECTIONS: list[SectionSpec] = [
    SectionSpec(
        "facts",
        "Facts shadow could have read",
        "Every steward fact in shadow's denominator, with its status in each coverage.",
        "SELECT * FROM ember.comparison_items({w}) WHERE item = 'fact' AND excluded_reason IS NULL",
    ),
    SectionSpec(
        "proposals",
        "Shadow proposals",
        "Every shadow proposal, valid or rejected, with its status in each coverage.",
        "SELECT * FROM ember.comparison_items({w}) WHERE item = 'proposal'",
    ),
    SectionSpec(
        "exact",
        "Matched exactly",
        "Facts with a proposal of the same thread whose text is equal after normalization.",
        "SELECT * FROM ember.comparison_exact({w})",
    ),
    SectionSpec(
        "evidence",
        "Evidence neighbours",
        "Facts sharing an evidence pointer with a proposal of the same thread: neighbours to "
        "read, not coverage of meaning.",
        "SELECT * FROM ember.comparison_evidence({w})",
    ),
    SectionSpec(
        "semantic",
        "Semantic pairs",
        "Facts a light model judged to say the same as a proposal: reviewable, not truth.",
        "SELECT * FROM ember.comparison_semantic({w})",
    ),
    SectionSpec(
        "steward-only",
        "Steward only",
        "Facts shadow could have read that no proposal matches in any way.",
        "SELECT * FROM ember.comparison_items({w}) WHERE agreement = 'steward only'",
    ),
    SectionSpec(
        "shadow-only",
        "Shadow only",
        "Valid proposals that match no fact in any way.",
        "SELECT * FROM ember.comparison_items({w}) WHERE agreement = 'shadow only'",
    ),
    SectionSpec(
        "rejected",
        "Rejected proposals",
        "Proposals the checks refused, kept as comparison data, with the reason.",
        "SELECT * FROM ember.comparison_rejected({w})",
    ),
    SectionSpec(
        "excluded",
        "Facts shadow could not have read",
        "Left out of shadow's coverage, listed apart: none of their pointers names a row shadow "
        "reads.",
        "SELECT * FROM ember.comparison_excluded_facts({w})",
    ),
    SectionSpec(
        "runs",
        "Runs",
        "Every run behind the cost and latency figures.",
        "SELECT * FROM ember.comparison_run_list({w})",
    ),
]
SECTION_BY_KEY = {s.key: s for s in SECTIONS}


@dataclass
class Section:
    spec: SectionSpec
    # Distinct items the section is about (a fact citing two threads has two rows, one item):
    # the figure the summary shows for it.
    count: int
    rows: list[Row]
    shown: list[Row]
    query: str


@dataclass
class Report:
    since: datetime | None
    until: datetime | None
    summary: Row
    cost: list[Row]
    latency: list[Row]
    evidence_quality: list[Row]
    daily: list[Row]
    context: Row = field(default_factory=dict)
    by_path: list[Row] = field(default_factory=list)
    by_thread: list[Row] = field(default_factory=list)
    sections: dict[str, Section] = field(default_factory=dict)
    # Items by (item, id), for the other side of a pair.
    items: dict[tuple[str, int], Row] = field(default_factory=dict)
    rows_per_section: int = DEFAULT_ROWS
    cache_misses: list[Row] = field(default_factory=list)
    # The consolidation job's review queue: contradictions and low-confidence actions.
    review: list[Row] = field(default_factory=list)

    @property
    def judged(self) -> bool:
        """Whether a judge has been shown any fact of the window."""
        return bool(self.summary.get("semantic_judged_facts"))

    def as_json(self) -> dict[str, Any]:
        plain: dict[str, Any] = jsonable(
            {
                "window": {"since": self.since, "until": self.until},
                "context": {
                    "database": self.context.get("database_name"),
                    "generated_at": self.context.get("generated_at"),
                    "first_at": self.summary.get("first_at"),
                    "last_at": self.summary.get("last_at"),
                    "shadow_activated_at": self.context.get("shadow_activated_at"),
                    "excerpt_chars": self.context.get("analyst_row_chars"),
                },
                "summary": self.summary,
                "by_path": self.by_path,
                "by_thread": self.by_thread,
                "cost": self.cost,
                "latency": self.latency,
                "evidence_quality": self.evidence_quality,
                "daily": self.daily,
                "sections": {
                    key: {
                        "title": s.spec.title,
                        "count": s.count,
                        "rows": len(s.rows),
                        "shown": len(s.shown),
                        "query": s.query,
                        "items": s.shown,
                    }
                    for key, s in self.sections.items()
                },
                "cache_misses": self.cache_misses,
                "review_queue": self.review,
                "notes": {
                    "coverage": "exact, evidence and semantic coverage are separate measures, "
                    "never added up; evidence neighbours are not semantic coverage; semantic "
                    "pairs are reviewable, not truth",
                    "denominator": excluded_line(self.summary),
                    "semantic": "semantic coverage is null (not judged) while no fact of the "
                    "window has been shown to a judge",
                    "cost": "list-price snapshot, not subscription billing; NULL when a run "
                    "lacks a price",
                },
            }
        )
        return plain


def jsonable(value: Any) -> Any:
    """A report's rows as JSON can hold them (the comparison's and ember eval's reports alike)."""
    # Counts, tokens and milliseconds are integers in SQL already; Decimal is only USD and ratios.
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
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


def _window_args(since: datetime | None, until: datetime | None) -> str:
    def one(at: datetime | None) -> str:
        return "NULL" if at is None else f"'{at.isoformat()}'"

    return f"{one(since)}, {one(until)}"


def _select(items: list[Row], key: str) -> list[Row]:
    """The item rows of one section (runs are not items)."""
    if key == "facts":
        return [r for r in items if r["item"] == "fact" and r["excluded_reason"] is None]
    if key == "proposals":
        return [r for r in items if r["item"] == "proposal"]
    if key == "exact":
        return [r for r in items if r["item"] == "fact" and r["exact"] == "exact"]
    if key == "evidence":
        return [r for r in items if r["item"] == "fact" and r["evidence"] == "neighbour"]
    if key == "semantic":
        return [r for r in items if r["item"] == "fact" and r["semantic"] == "pair"]
    if key == "excluded":
        in_scope = {r["item_id"] for r in items if r["item"] == "fact" and not r["excluded_reason"]}
        return [
            r
            for r in items
            if r["item"] == "fact" and r["excluded_reason"] and r["item_id"] not in in_scope
        ]
    agreement = {"steward-only": "steward only", "shadow-only": "shadow only"}.get(key, key)
    return [r for r in items if r["agreement"] == agreement]


def collect(
    conn: psycopg.Connection[Row],
    since: datetime | None,
    until: datetime | None,
    *,
    rows_per_section: int = DEFAULT_ROWS,
) -> Report:
    window = {"since": since, "until": until}
    summary = conn.execute(queries.COMPARISON_SUMMARY, window).fetchone() or {}
    report = Report(
        since=since,
        until=until,
        summary=dict(summary),
        cost=list(conn.execute(queries.COMPARISON_COST, window)),
        latency=list(conn.execute(queries.COMPARISON_LATENCY, window)),
        evidence_quality=list(conn.execute(queries.COMPARISON_EVIDENCE_QUALITY, window)),
        daily=list(conn.execute(queries.COMPARISON_DAILY, window)),
        context=dict(conn.execute(queries.COMPARISON_CONTEXT, window).fetchone() or {}),
        by_path=list(conn.execute(queries.COMPARISON_BY_PATH, window)),
        by_thread=list(conn.execute(queries.COMPARISON_BY_THREAD, window)),
        rows_per_section=rows_per_section,
        cache_misses=list(conn.execute(queries.COMPARISON_CACHE_MISSES, window)),
        review=list(conn.execute(queries.COMPARISON_REVIEW_QUEUE)),
    )
    items = list(conn.execute(queries.COMPARISON_ITEMS, window))
    report.items = {(r["item"], r["item_id"]): r for r in items}
    runs = list(conn.execute(queries.COMPARISON_RUN_LIST, window))
    w = _window_args(since, until)
    for spec in SECTIONS:
        rows = runs if spec.key == "runs" else _select(items, spec.key)
        ids = {(r.get("item", "run"), r.get("item_id", r.get("run_id"))) for r in rows}
        report.sections[spec.key] = Section(
            spec=spec,
            count=len(ids) if spec.key != "runs" else len(rows),
            rows=rows,
            shown=[dict(r) for r in rows[:rows_per_section]],
            query=spec.query.format(w=w),
        )
    _attach_evidence(conn, report)
    return report


def _partners(row: Row) -> list[tuple[str, int]]:
    other = "proposal" if row.get("item") == "fact" else "fact"
    ids = sorted(set(row.get("exact_ids") or []) | set(row.get("evidence_ids") or []))
    ids += sorted(set(row.get("semantic_ids") or []) - set(ids))
    return [(other, i) for i in ids]


def _attach_evidence(conn: psycopg.Connection[Row], report: Report) -> None:
    """Each shown item gets its evidence pointers, rendered in SQL; each shown pair its other
    side, with that side's evidence too."""
    wanted: set[tuple[str, int]] = set()
    for key, section in report.sections.items():
        if key == "runs":
            continue
        for row in section.shown:
            wanted.add((row["item"], row["item_id"]))
            wanted.update(_partners(row))
    facts = sorted(i for kind, i in wanted if kind == "fact")
    proposals = sorted(i for kind, i in wanted if kind == "proposal")
    evidence: dict[tuple[str, int], list[Row]] = {}
    if facts or proposals:
        for p in conn.execute(
            queries.COMPARISON_ITEM_EVIDENCE,
            {
                "since": report.since,
                "until": report.until,
                "fact_ids": facts,
                "proposal_ids": proposals,
            },
        ):
            evidence.setdefault((p["item"], p["item_id"]), []).append(p)
    for key, section in report.sections.items():
        if key == "runs":
            continue
        for row in section.shown:
            row["evidence_rows"] = evidence.get((row["item"], row["item_id"]), [])
            row["paired"] = [_partner(report, row, kind, i, evidence) for kind, i in _partners(row)]


_PAIR_COLUMNS = (("exact", "exact_ids"), ("evidence", "evidence_ids"), ("semantic", "semantic_ids"))


def _partner(
    report: Report, row: Row, kind: str, item_id: int, evidence: dict[tuple[str, int], list[Row]]
) -> Row:
    """The other side of a pair: its text and evidence, and which coverages pair the two."""
    other = report.items.get((kind, item_id)) or {}
    return {
        "item": kind,
        "item_id": item_id,
        "thread_id": other.get("thread_id"),
        "path": other.get("path"),
        "text": other.get("text"),
        "kinds": [k for k, col in _PAIR_COLUMNS if item_id in (row.get(col) or [])],
        "evidence_rows": evidence.get((kind, item_id), []),
    }


# --- figures for people ---


def fmt(value: Any, kind: str = "") -> str:
    """A figure for people: NULL stays visible as 'unknown' (a price) or '-' (no data)."""
    if value is None:
        return "unknown" if kind == "usd" else "-"
    if kind == "usd":
        return f"${Decimal(value):.4f}"
    if kind == "pct":
        return f"{float(value) * 100:.1f}%"
    if kind == "ms":
        return f"{int(value):,} ms"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "none"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


NOT_JUDGED = "not judged"


def summary_figure(summary: Row, key: str, kind: str) -> str:
    """A summary figure as shown: "not judged" where no judge ran, instead of 0 or $0."""
    judged = bool(summary.get("semantic_judged_facts"))
    if key in ("semantic_coverage", "semantic_covered_facts") and not judged:
        return NOT_JUDGED
    if key == "judge_usd" and not summary.get("judge_runs"):
        return NOT_JUDGED
    return fmt(summary.get(key), kind)


# (column, label, kind, the drill-down section its rows are in)
SUMMARY_ROWS: list[tuple[str, str, str, str | None]] = [
    ("proposals", "shadow proposals", "", "proposals"),
    ("valid_proposals", "valid proposals", "", "proposals"),
    ("rejected_proposals", "rejected proposals", "", "rejected"),
    ("rejected_by_reason", "rejected, by reason", "", "rejected"),
    ("facts", "steward facts shadow could have read", "", "facts"),
    ("excluded_facts", "steward facts left out (shadow never reads their rows)", "", "excluded"),
    ("exact_covered_facts", "facts with an exact match", "", "exact"),
    ("exact_coverage", "exact coverage", "pct", "exact"),
    ("evidence_neighbour_facts", "facts with an evidence neighbour", "", "evidence"),
    ("evidence_coverage", "evidence coverage (neighbours, not meaning)", "pct", "evidence"),
    ("semantic_covered_facts", "facts in a judged pair", "", "semantic"),
    ("semantic_coverage", "semantic coverage (reviewable, not truth)", "pct", "semantic"),
    ("steward_only_facts", "steward only: facts no proposal matches", "", "steward-only"),
    ("shadow_only_proposals", "shadow only: proposals matching no fact", "", "shadow-only"),
    ("steward_usd", "steward cost", "usd", "runs"),
    ("shadow_usd", "shadow cost", "usd", "runs"),
    ("judge_usd", "semantic judge cost", "usd", "runs"),
    ("steward_p50_ms", "steward latency p50", "ms", "runs"),
    ("steward_p95_ms", "steward latency p95", "ms", "runs"),
    ("shadow_p50_ms", "shadow latency p50", "ms", "runs"),
    ("shadow_p95_ms", "shadow latency p95", "ms", "runs"),
]

# (column, label, kind) of the hot / cold / steward table.
PATH_ROWS: list[tuple[str, str, str]] = [
    ("runs", "runs", ""),
    ("completed_runs", "completed runs", ""),
    ("proposals", "proposals", ""),
    ("validity_rate", "validity rate (valid / proposals)", "pct"),
    ("facts", "facts whose rows the path read (steward: facts written)", ""),
    ("exact_coverage", "exact coverage", "pct"),
    ("evidence_coverage", "evidence coverage (neighbours)", "pct"),
    ("semantic_coverage", "semantic coverage (reviewable)", "pct"),
    ("estimated_usd", "cost", "usd"),
    ("output_usd", "output cost", "usd"),
    ("output_share", "output share of cost", "pct"),
    ("usd_per_fact", "cost per fact (shadow: per valid proposal)", "usd"),
    ("messages_digested", "messages digested", ""),
    ("usd_per_1000_messages", "cost per 1,000 digested messages", "usd"),
    ("p50_ms", "latency p50", "ms"),
    ("p95_ms", "latency p95", "ms"),
    ("max_ms", "latency max", "ms"),
]


def path_figure(row: Row, key: str, kind: str) -> str:
    if row["path"] == "steward" and key in (
        "proposals",
        "validity_rate",
        "exact_coverage",
        "evidence_coverage",
        "semantic_coverage",
    ):
        return "n/a"
    if key.endswith("_coverage") and not row.get("facts"):
        return "no facts"
    if key == "semantic_coverage" and not row.get("semantic_judged_facts"):
        return NOT_JUDGED
    return fmt(row.get(key), kind)


def excluded_line(summary: Row) -> str:
    """The denominator, said in one line."""
    n = int(summary.get("excluded_facts") or 0)
    return (
        "Shadow's coverage counts only facts shadow could have read: "
        f"{n} fact{'' if n == 1 else 's'} drawn only from rows shadow never reads (main, the "
        "steward's record, history from before shadow's activation) "
        f"{'is' if n == 1 else 'are'} left out of the denominator and listed apart."
    )


def _when(at: Any) -> str:
    if isinstance(at, datetime):
        return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return "-"


def window_label(since: datetime | None, until: datetime | None) -> str:
    a = since.isoformat(timespec="minutes") if since else "the beginning"
    b = until.isoformat(timespec="minutes") if until else "now"
    return f"from {a} to {b}"


def absolute_window(report: Report) -> str:
    """The window in absolute time: as asked, or the data's first and last time when open."""
    first = report.since or report.summary.get("first_at")
    last = report.until or report.summary.get("last_at")
    if first is None and last is None:
        return f"{window_label(report.since, report.until)} (no data)"
    return f"{_when(first)} to {_when(last)}"


def frame_line(report: Report) -> str:
    return (
        f"database {report.context.get('database_name', '?')}, window {absolute_window(report)} "
        f"(asked: {window_label(report.since, report.until)}), "
        f"generated {_when(report.context.get('generated_at'))}"
    )


# --- terminal ---


def print_tables(report: Report, console: Printer) -> None:
    console.print(frame_line(report))
    print_summary(report, console)
    print_paths(report, console)
    print_threads(report, console)
    print_cost(report, console)
    print_latency(report, console)
    print_evidence_quality(report, console)
    print_cache_misses(report, console)
    print_review_queue(report, console)
    console.print(
        "The rows behind each number: ember compare --html FILE, ember compare --json, or in "
        "psql ember.comparison_items, ember.comparison_item_evidence, ember.comparison_run_list; "
        "one item: ember explain FACT_ID, ember explain --proposal ID."
    )


def print_summary(report: Report, console: Printer) -> None:
    summary = Table(title=f"Comparison summary, {window_label(report.since, report.until)}")
    summary.add_column("measure")
    summary.add_column("value", justify="right")
    for key, label, kind, _ in SUMMARY_ROWS:
        summary.add_row(label, summary_figure(report.summary, key, kind))
    console.print(summary)
    console.print(excluded_line(report.summary))


def print_paths(report: Report, console: Printer) -> None:
    paths = Table(title="Hot vs cold, beside the steward")
    paths.add_column("measure")
    for row in report.by_path:
        paths.add_column(row["path"], justify="right")
    for key, label, kind in PATH_ROWS:
        paths.add_row(label, *[path_figure(row, key, kind) for row in report.by_path])
    console.print(paths)


def print_threads(report: Report, console: Printer) -> None:
    threads = Table(title="Per thread")
    for col in (
        "thread",
        "proposals",
        "rejected",
        "facts",
        "excluded",
        "exact",
        "neighbours",
        "semantic",
        "steward only",
        "shadow only",
    ):
        threads.add_column(col, justify="left" if col == "thread" else "right")
    for r in report.by_thread:
        threads.add_row(
            r["thread_id"],
            fmt(r["proposals"]),
            fmt(r["rejected_proposals"]),
            fmt(r["facts"]),
            fmt(r["excluded_facts"]),
            fmt(r["exact_covered_facts"]),
            fmt(r["evidence_neighbour_facts"]),
            fmt(r["semantic_covered_facts"]) if report.judged else NOT_JUDGED,
            fmt(r["steward_only_facts"]),
            fmt(r["shadow_only_proposals"]),
        )
    if not report.by_thread:
        threads.add_row("no thread in this window", *[""] * 9)
    console.print(threads)


# The cost, latency and evidence-quality tables as the terminal and the HTML page show them:
# their leading text columns, then numbers.
COST_COLUMNS = (
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
    # Input only: what the runs' input cost, what their claims predicted for it on the path
    # taken, and on the path not taken (shadow runs; comparison_cost).
    "input USD",
    "predicted",
    "other path",
)
COST_TEXT_COLUMNS = 3
LATENCY_COLUMNS = ("pipeline", "model", "runs", "p50", "p95", "max")
LATENCY_TEXT_COLUMNS = 2
QUALITY_COLUMNS = ("source", "kind", "check", "pointers")
QUALITY_TEXT_COLUMNS = 3


def cost_rows(report: Report) -> list[list[str]]:
    return [
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
            fmt(r["runs_without_price"]),
            fmt(r["estimated_usd"], "usd"),
            fmt(r["input_usd"], "usd"),
            # Only a shadow claim predicts; for the others there is nothing to show, not an unknown.
            *(
                [fmt(r["predicted_input_usd"], "usd"), fmt(r["predicted_other_path_usd"], "usd")]
                if r["pipeline"].startswith("shadow")
                else ["-", "-"]
            ),
        ]
        for r in report.cost
    ]


def latency_rows(report: Report) -> list[list[str]]:
    return [
        [
            r["pipeline"],
            r["model"],
            fmt(r["runs"]),
            fmt(r["p50_ms"], "ms"),
            fmt(r["p95_ms"], "ms"),
            fmt(r["max_ms"], "ms"),
        ]
        for r in report.latency
    ]


def quality_rows(report: Report) -> list[list[str]]:
    return [
        [r["source"], r["evidence_kind"], r["problem"], fmt(r["pointers"])]
        for r in report.evidence_quality
    ]


def _print_rows(
    console: Printer,
    title: str,
    columns: tuple[str, ...],
    text_columns: int,
    rows: list[list[str]],
    empty: str,
) -> None:
    """A table whose first `text_columns` columns are text and the rest numbers, right-aligned;
    one row saying `empty` when there is none."""
    table = Table(title=title)
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i < text_columns else "right")
    for row in rows:
        table.add_row(*row)
    if not rows:
        table.add_row(empty, *[""] * (len(columns) - 1))
    console.print(table)


def print_cost(report: Report, console: Printer) -> None:
    _print_rows(
        console,
        "Cost by pipeline (list-price snapshot, not subscription billing)",
        COST_COLUMNS,
        COST_TEXT_COLUMNS,
        cost_rows(report),
        "no runs in this window",
    )


def print_latency(report: Report, console: Printer) -> None:
    _print_rows(
        console,
        "Latency by pipeline and model",
        LATENCY_COLUMNS,
        LATENCY_TEXT_COLUMNS,
        latency_rows(report),
        "no finished runs in this window",
    )


def print_evidence_quality(report: Report, console: Printer) -> None:
    _print_rows(
        console,
        "Evidence quality (pointer identity only; correctness needs a human read)",
        QUALITY_COLUMNS,
        QUALITY_TEXT_COLUMNS,
        quality_rows(report),
        "no evidence in this window",
    )


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
REVIEW_COLUMNS = ("action", "item", "confidence", "facts", "reason", "decided")


def review_rows(report: Report) -> list[list[str]]:
    """The review queue, one row per item: waiting ones first, decided ones with who and when."""
    rows = []
    for r in report.review:
        facts = "; ".join(f"F{f['id']} ({f['status']}) {f['text']}" for f in r["facts"] or [])
        decided = (
            f"{r['review']} by {r['reviewed_by']} at {_when(r['reviewed_at'])}"
            if r["review"]
            else "waiting"
        )
        rows.append(
            [fmt(r["action_id"]), r["item"], fmt(r["confidence"]), facts, r["reason"], decided]
        )
    return rows


def print_review_queue(report: Report, console: Printer) -> None:
    queue = Table(title="Review queue (consolidation: contradictions and low-confidence actions)")
    for col in REVIEW_COLUMNS:
        queue.add_column(col, justify="right" if col in ("action", "confidence") else "left")
    for row in review_rows(report):
        queue.add_row(*row)
    if not report.review:
        queue.add_row("", "nothing waits for a person", "", "", "", "")
    console.print(queue)


def to_json(report: Report) -> str:
    return json.dumps(report.as_json(), ensure_ascii=False, indent=2)
