"""The analyst's report built from the demo corpus, read the way an analyst reads it: as a login
role granted ember_analyst, in real headless Chromium (Debian's `/usr/bin/chromium`), from a
summary number down to the rows behind it, and in psql.

The demo runs once for the module (the whole corpus, through the host API, the worker as a
sidecar and the judge); the report is then built by `ember compare` connected as the analyst.
A screenshot of every section is saved under test-output/compare-report/ (gitignored) for a
person to look at; the test prints where.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from browser import Chromium, Tab
from ember.cli import main as ember_main
from ember.comparison.report import SECTIONS
from ember.config import database_url, with_database
from ember.devsetup import chromium_path, drop_database

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-output" / "compare-report"


@contextlib.contextmanager
def environment(url: str) -> Iterator[None]:
    saved = os.environ.get("DATABASE_URL")
    os.environ["DATABASE_URL"] = url
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("DATABASE_URL", None)
        else:
            os.environ["DATABASE_URL"] = saved


def ember(url: str, *args: str) -> tuple[int, str]:
    printed = io.StringIO()
    with environment(url), contextlib.redirect_stdout(printed):
        code = ember_main(list(args))
    return code, printed.getvalue()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The demo on the whole corpus; an analyst login on its database; the report as HTML."""
    server = database_url()
    out = tmp_path_factory.mktemp("demo")
    name = f"ember_demo_b_{os.getpid()}"
    role, password = f"ember_t_analyst_{os.getpid()}", "analyst-secret"
    code, _ = ember(server, "demo", "--database", name, "--port", "0", "--out", str(out), "--plain")
    assert code == 0
    owner = with_database(server, name)
    with psycopg.connect(owner, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE ember_analyst").format(
                sql.Identifier(role), sql.Literal(password)
            )
        )
    params = {k: v for k, v in conninfo_to_dict(owner).items() if k != "passfile"}
    params.update(user=role, password=password)
    analyst = make_conninfo(**params)  # type: ignore[arg-type]
    page = out / "analyst-report.html"
    try:
        code, _ = ember(analyst, "compare", "--html", str(page))
        assert code == 0
        code, printed = ember(analyst, "compare", "--json")
        assert code == 0
        yield {"owner": owner, "analyst": analyst, "page": page, "json": json.loads(printed)}
    finally:
        with psycopg.connect(with_database(server, "postgres"), autocommit=True) as conn:
            drop_database(server, name)
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def analyst_rows(demo: dict[str, Any], query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(demo["analyst"]) as conn:
        assert conn.execute("SELECT pg_has_role('ember_analyst', 'MEMBER')").fetchone() == (True,)
        return conn.execute(query).fetchall()


def rows_in(tab: Tab, selector: str) -> list[tuple[str, int]]:
    """(item, id) of every item row under selector."""
    raw = tab.evaluate(
        "JSON.stringify([...document.querySelectorAll("
        + json.dumps(selector + " tr[data-item]")
        + ")].map(r => [r.dataset.item, Number(r.dataset.id)]))"
    )
    return [(item, int(i)) for item, i in json.loads(raw)]


def click_and_land(browser: Chromium, tab: Tab, selector: str) -> str:
    """Click the link, wait for the in-page navigation, and check its target is on screen."""
    browser.events.clear()
    tab.click(selector)
    browser.wait_event("Page.navigatedWithinDocument")
    target = str(tab.evaluate("location.hash"))
    top = float(
        tab.evaluate(f"document.querySelector({json.dumps(target)}).getBoundingClientRect().top")
    )
    height = float(tab.evaluate("innerHeight"))
    assert -1 <= top < height / 2, f"{target} is not in view after the click: top {top}"
    return target


def test_the_report_loads_offline_and_every_section_is_shot(
    demo: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    exe = chromium_path()
    assert exe, "Chromium is missing: run `make setup` (ember setup-chromium)"
    url = demo["page"].as_uri()
    SHOTS.mkdir(parents=True, exist_ok=True)
    with Chromium(exe) as browser:
        tab = browser.open(url, width=1400)
        shots = tab.element_shots("section")
        errors, requests = tab.console_errors(), tab.requests()
        tab.close()
    assert errors == []
    assert [u for u in requests if u != url] == []
    expected = ["sec-summary", "sec-paths", "sec-threads", "sec-time", "sec-cost", "sec-latency",
                "sec-quality", "sec-cache", "sec-review"]  # fmt: skip
    expected += [f"sec-{s.key}" for s in SECTIONS]
    assert list(shots) == expected
    for name, png in shots.items():
        # A blank section compresses to almost nothing; text, tables and charts do not.
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
        width, height = struct.unpack(">II", png[16:24])
        assert width > 300 and height > 40, (name, width, height)
        assert len(png) > 4000, f"{name}: the screenshot is blank ({len(png)} bytes)"
        (SHOTS / f"{name}.png").write_bytes(png)
    with capsys.disabled():
        print(f"\nscreenshots of the report's sections, one per section: {SHOTS}")


def test_a_summary_number_leads_to_the_rows_behind_it(demo: dict[str, Any]) -> None:
    exe = chromium_path()
    assert exe
    summary = demo["json"]["summary"]
    with Chromium(exe) as browser:
        tab = browser.open(demo["page"].as_uri(), width=1400)
        # Facts matched exactly: the figure, then the section it links to.
        shown = tab.evaluate(
            "document.querySelector('td[data-key=exact_covered_facts] a').textContent"
        )
        assert int(shown) == summary["exact_covered_facts"] > 0
        assert click_and_land(browser, tab, "td[data-key=exact_covered_facts] a") == "#sec-exact"
        clicked = rows_in(tab, "#sec-exact")
        # The facts excluded from shadow's denominator: main's, in their own section.
        assert click_and_land(browser, tab, "td[data-key=excluded_facts] a") == "#sec-excluded"
        excluded = rows_in(tab, "#sec-excluded")
        excluded_text = str(tab.evaluate("document.querySelector('#sec-excluded').innerText"))
        # A per-thread count: main's excluded facts, in main's group of that section.
        main_cell = (
            "[...document.querySelectorAll('#threads tr')].find(r => r.cells[0].textContent === "
            "'main').querySelector('td[data-column=excluded_facts] a')"
        )
        tab.evaluate(f"{main_cell}.id = 'main-excluded'")
        target = click_and_land(browser, tab, "#main-excluded")
        assert re.fullmatch(r"#excluded-t\d+", target)
        group = rows_in(tab, target)
        group_threads = tab.evaluate(
            f"[...document.querySelectorAll('{target} tr')].map(r => r.cells[0].textContent)"
        )
        tab.close()
    exact = analyst_rows(
        demo,
        "SELECT DISTINCT item_id FROM ember.comparison_items"
        " WHERE item = 'fact' AND exact = 'exact'",
    )
    assert {i for _, i in clicked} == {r[0] for r in exact}
    assert len({i for _, i in clicked}) == summary["exact_covered_facts"]
    gone = analyst_rows(
        demo, "SELECT fact_id, excluded_reason FROM ember.comparison_excluded_facts"
    )
    assert {i for _, i in excluded} == {r[0] for r in gone} and len(gone) == summary[
        "excluded_facts"
    ]
    assert {r[1] for r in gone} == {"main: shadow never reads main"}
    assert "main: shadow never reads main" in excluded_text
    assert group and set(group_threads) == {"main"}


def test_the_rows_show_texts_evidence_and_explain_ids(demo: dict[str, Any]) -> None:
    page = demo["page"].read_text(encoding="utf-8")
    sections = demo["json"]["sections"]
    fact = sections["exact"]["items"][0]
    # Its text, its evidence rendered as the row it names, the proposal it matches, and both
    # explain commands.
    assert fact["text"] and fact["evidence_rows"] and fact["paired"]
    excerpt = fact["evidence_rows"][0]["excerpt"]
    assert excerpt.startswith(f"m:{fact['evidence_rows'][0]['message_id']} ")
    from html import escape

    assert escape(excerpt) in page
    assert f"ember explain {fact['item_id']}" in page
    assert f"ember explain --proposal {fact['paired'][0]['item_id']}" in page
    # The seeds' own example: three proposals of the hot thread and no steward fact.
    threads = {r["thread_id"]: r for r in demo["json"]["by_thread"]}
    deploy = threads["deploy-workspace"]
    assert (deploy["proposals"], deploy["facts"], deploy["shadow_only_proposals"]) == (3, 0, 3)
    assert "JOURNAL-ONLY-7f3a" not in page and "private-journal" not in page


def test_json_numbers_are_numbers(demo: dict[str, Any]) -> None:
    report = demo["json"]

    def walk(value: Any, key: str = "") -> Iterator[tuple[str, Any]]:
        if isinstance(value, dict):
            for k, v in value.items():
                yield from walk(v, k)
        elif isinstance(value, list):
            for v in value:
                yield from walk(v, key)
        else:
            yield key, value

    integral = re.compile(r"(_ms|_tokens|^runs|_runs|^facts|_facts|^proposals|_proposals|"
                          r"messages_digested|^pointers|^count|^rows|^shown)$")  # fmt: skip
    checked = 0
    for key, value in walk(report):
        if integral.search(key) and value is not None:
            assert type(value) is int, (key, value)
            checked += 1
    assert checked > 100
    assert report["context"]["database"].startswith("ember_demo_b_")
    assert report["context"]["first_at"] and report["context"]["generated_at"]
    paths = {r["path"]: r for r in report["by_path"]}
    assert set(paths) == {"hot", "cold", "steward"}
    for path in ("hot", "cold"):
        assert paths[path]["proposals"] > 0 and 0 <= paths[path]["output_share"] <= 1
    assert paths["steward"]["usd_per_1000_messages"] > 0
    # The JSON and the page list the same rows.
    page = demo["page"].read_text(encoding="utf-8")
    for key, section in report["sections"].items():
        if key != "runs":
            assert len(set(re.findall(rf'<section id="sec-{key}".*?</section>', page, re.S))) == 1
            body = re.search(rf'<section id="sec-{key}".*?</section>', page, re.S)
            assert body is not None
            assert len(re.findall(r"<tr data-item=", body.group(0))) == section["shown"], key


def test_the_analyst_explains_from_the_command_line(demo: dict[str, Any]) -> None:
    fact = demo["json"]["sections"]["exact"]["items"][0]
    code, out = ember(demo["analyst"], "explain", str(fact["item_id"]))
    assert code == 0
    assert f"fact {fact['item_id']}" in out and "comparison: exact" in out
    assert fact["evidence_rows"][0]["excerpt"] in out
    proposal = fact["paired"][0]["item_id"]
    code, out = ember(demo["analyst"], "explain", "--proposal", str(proposal))
    assert code == 0 and f"proposal {proposal}" in out
    excluded = demo["json"]["sections"]["excluded"]["items"][0]["item_id"]
    code, out = ember(demo["analyst"], "explain", str(excluded))
    assert code == 0 and "not compared (main: shadow never reads main)" in out
    with (
        psycopg.connect(demo["analyst"]) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute("SELECT ember.explain_fact(%s)", (excluded,))
