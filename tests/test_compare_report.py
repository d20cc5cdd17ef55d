"""`ember compare`: the report's figures in JSON and HTML, its read-only connection, an empty
window, and the HTML page in a real browser (Debian's Chromium, installed by `make setup`)."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import psycopg
import pytest

import comparedata as data
from browser import Chromium, read_png
from ember.cli import EXIT_NOT_FOUND, EXIT_REFUSED, main
from ember.comparison.report import parse_when, read_only
from ember.devsetup import chromium_path

CHARTS = ("chart-coverage", "chart-cost", "chart-latency")


@pytest.fixture
def seeded(db: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    monkeypatch.setenv("DATABASE_URL", db)
    with psycopg.connect(db, autocommit=True) as conn:
        ids = data.seed_case(conn)
        data.steward_run(conn, 9000, priced=False)  # the steward's USD is unknown from here on
    return ids


def report_json(capsys: Any, *args: str) -> dict[str, Any]:
    assert main(["compare", "--json", *args]) == 0
    parsed: dict[str, Any] = json.loads(capsys.readouterr().out)
    return parsed


class SummaryParser(HTMLParser):
    """Collects data-key/data-value pairs, every chart id, and any URL the page would fetch."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, str] = {}
        self.charts: list[str] = []
        self.fetches: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if "data-key" in a:
            self.values[str(a["data-key"])] = str(a.get("data-value") or "")
        if tag == "svg" and "chart" in (a.get("class") or ""):
            self.charts.append(str(a.get("id")))
        for name in ("src", "href"):
            # A fragment link moves within the page and fetches nothing.
            if a.get(name) and not str(a[name]).startswith("#"):
                self.fetches.append(str(a[name]))
        if tag in ("script", "link", "img", "iframe", "object", "embed"):
            self.fetches.append(tag)


def test_json_report_keeps_the_three_coverages_apart(seeded: dict[str, int], capsys: Any) -> None:
    report = report_json(capsys)
    s = report["summary"]
    # The seed's case (deploy) is a neighbour only; db is an exact match; diet is neither.
    assert (s["facts"], s["exact_covered_facts"], s["evidence_neighbour_facts"]) == (3, 1, 3)
    assert s["exact_coverage"] == pytest.approx(0.3333)
    # No judge has run: semantic coverage is not judged (null), not 0.
    assert s["evidence_coverage"] == 1.0 and s["semantic_coverage"] is None
    assert (s["semantic_judged_facts"], s["judge_runs"]) == (0, 0)
    assert s["steward_usd"] is None  # one unpriced steward run: unknown, never a smaller total
    assert s["shadow_usd"] == pytest.approx(3 * (20000 * 1 + 500 * 5) / 1e6)
    assert {r["pipeline"] for r in report["cost"]} == {"shadow cold", "steward"}
    assert report["daily"][0]["day"] == "2030-01-01"
    assert all("secret" not in json.dumps(v) for v in report.values())


def test_html_report_holds_the_summary_figures(
    seeded: dict[str, int], capsys: Any, tmp_path: Path
) -> None:
    summary = report_json(capsys)["summary"]
    page = tmp_path / "report.html"
    assert main(["compare", "--html", str(page)]) == 0
    parser = SummaryParser()
    parser.feed(page.read_text(encoding="utf-8"))
    for key in (
        "facts",
        "proposals",
        "rejected_proposals",
        "exact_coverage",
        "evidence_coverage",
        "semantic_coverage",
        "shadow_usd",
        "steward_p50_ms",
        "shadow_p95_ms",
    ):
        value = parser.values[key]
        expected = summary[key]
        if expected is None:
            assert value == ""
        else:
            assert float(value) == pytest.approx(float(expected)), key
    assert parser.values["steward_usd"] == ""
    assert parser.charts == list(CHARTS)
    assert parser.fetches == []


def test_an_empty_window_is_a_labelled_empty_report(
    seeded: dict[str, int], capsys: Any, tmp_path: Path
) -> None:
    report = report_json(capsys, "--since", "2031-01-01", "--until", "2031-02-01")
    assert report["window"] == {
        "since": "2031-01-01T00:00:00+00:00",
        "until": "2031-02-01T00:00:00+00:00",
    }
    assert report["summary"]["facts"] == 0 and report["summary"]["exact_coverage"] is None
    assert report["cost"] == [] and report["daily"] == []
    assert main(["compare", "--since", "2031-01-01"]) == 0
    out = capsys.readouterr().out
    assert "Comparison summary, from 2031-01-01T00:00+00:00 to now" in out
    assert "no evidence in this window" in out


def test_the_report_connection_cannot_write(db: str) -> None:
    with read_only(db) as conn, pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        conn.execute("DELETE FROM ember.facts")


def test_time_formats() -> None:
    now = parse_when("2030-01-08T00:00Z")
    assert parse_when("7d", now=now) == parse_when("2030-01-01")
    assert parse_when("24h", now=now) == parse_when("2030-01-07T00:00:00+00:00")
    with pytest.raises(ValueError, match="unknown time format 'soon'"):
        parse_when("soon")


def test_the_page_renders_in_chromium_offline_with_every_chart_drawn(
    seeded: dict[str, int], tmp_path: Path
) -> None:
    exe = chromium_path()
    assert exe, "Chromium is missing: run `make setup` (ember setup-chromium)"
    page = tmp_path / "report.html"
    assert main(["compare", "--html", str(page)]) == 0
    with Chromium(exe) as browser:
        load = browser.load(page.as_uri(), "svg.chart")
    assert load.console_errors == []
    assert [u for u in load.requests if u != page.as_uri()] == []
    assert [b["id"] for b in load.boxes] == list(CHARTS)
    for box in load.boxes:
        image = read_png(load.shots[box["id"]])
        assert image.width >= box["w"] - 1 and image.height >= box["h"] - 1
        pixels = [image.pixel(x, y) for y in range(image.height) for x in range(image.width)]
        inked = sum(1 for p in pixels if min(p) < 200)
        coloured = sum(1 for p in pixels if max(p) - min(p) > 60)
        # Non-blank: axes and labels, and coloured marks (the bars) drawn inside the chart.
        assert inked > 200, f"{box['id']}: {inked} dark pixels"
        assert coloured > 100, f"{box['id']}: {coloured} coloured pixels"


def test_rejected_proposals_and_not_judged_in_the_page(
    seeded: dict[str, int], db: str, capsys: Any, tmp_path: Path
) -> None:
    """A proposal citing the sealed thread is rejected: its reason is listed, its pointer named
    as isolated and nothing more; with no judge run, semantic figures read "not judged"."""
    with psycopg.connect(db, autocommit=True) as conn:
        run = data.shadow_run(conn, "deploy")
        conn.execute(
            """
            INSERT INTO ember.shadow_proposals (
                run_id, thread_id, generation_id, ordinal, text, evidence_kind, evidence,
                validation_error, created_at
            )
            SELECT r.id, r.thread_id, r.generation_id, 1, 'A code exists', 'user-stated',
                   jsonb_build_array(jsonb_build_object('message_id', %s::bigint)),
                   'pointer 1 (message ' || %s || '): not in thread "deploy"', %s
            FROM ember.shadow_runs AS r WHERE r.id = %s
            """,
            (seeded["m_secret"], seeded["m_secret"], data.AT, run),
        )
    page = tmp_path / "report.html"
    assert main(["compare", "--html", str(page)]) == 0
    capsys.readouterr()
    html = page.read_text(encoding="utf-8")
    rejected = html.split('<section id="sec-rejected"', 1)[1].split("</section>", 1)[0]
    assert "A code exists" in rejected and "not in thread &quot;deploy&quot;" in rejected
    assert "a row of an isolated thread: never shown" in rejected
    assert "launch code" not in html.lower() and "secret" not in html
    summary = html.split('<table id="summary">', 1)[1].split("</table>", 1)[0]
    for key in ("semantic_coverage", "semantic_covered_facts", "judge_usd"):
        cell = summary.split(f'data-key="{key}"', 1)[1].split("</td>", 1)[0]
        assert "not judged" in cell, key
    report = report_json(capsys)
    assert report["summary"]["rejected_proposals"] == 1
    assert report["sections"]["rejected"]["count"] == 1
    pointer = report["sections"]["rejected"]["items"][0]["evidence_rows"][0]
    assert pointer["isolated"] is True and pointer["thread_id"] is None
    assert pointer["excerpt"] is None


def test_terminal_tables_say_the_denominator_and_split_by_path(
    seeded: dict[str, int], capsys: Any
) -> None:
    assert main(["compare"]) == 0
    out = capsys.readouterr().out
    assert "Shadow's coverage counts only facts shadow could have read" in out
    assert "Hot vs cold, beside the steward" in out and "Per thread" in out
    assert "not judged" in out


def test_explain_as_the_owner_is_the_hosts_unless_asked(
    seeded: dict[str, int], capsys: Any
) -> None:
    assert main(["explain", str(seeded["f_db"])]) == 0
    host = capsys.readouterr().out
    assert "comparison:" not in host and "we use postgres" in host
    assert main(["explain", "--analyst", str(seeded["f_db"])]) == 0
    analyst = capsys.readouterr().out
    assert "comparison: exact" in analyst
    assert main(["explain", "--proposal", str(seeded["p_deploy"])]) == 0
    assert "comparison: evidence" in capsys.readouterr().out
    # The sealed thread's fact and proposal: refused by name for the analyst.
    assert main(["explain", "--analyst", str(seeded["f_secret"])]) == EXIT_REFUSED
    assert "not shown to the analyst" in capsys.readouterr().err
    assert main(["explain", "--proposal", str(seeded["p_secret"])]) == EXIT_REFUSED
    assert main(["explain", "--proposal", "987654"]) == EXIT_NOT_FOUND
    assert "no such proposal: 987654" in capsys.readouterr().err
