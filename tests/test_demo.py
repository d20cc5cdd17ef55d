"""`ember demo` end to end on a slice of the sample corpus: the points the README promises.

The slice keeps one thread of each kind the demo needs: a hot thread (the seeds' workspace
example), the thread whose shadow turn the user interrupts, the health thread, the isolated
journal, an idle thread for the cold path and the steward (with an accepted proposal), and main.
What the simulator received is read back from its JSONL log, independently of the demo's own
summary.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ember.cli import main as ember_main
from ember.config import with_database
from ember.demo.corpus import HOST_RESPONDER, DemoClock, load_corpus
from ember.demo.run import REPORT, SIM_LOG, keep_previous, start_sim
from ember.devsetup import drop_database
from ember.sim import Heuristic, Scripted
from ember.tools import SHADOW_TOOL_NAME

SLICE = "deploy-workspace,dinner-plans,knee-rehab,private-journal,trip-lisbon"


def _strip_markers(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_markers(v) for v in value]
    return value


def _total_input(usage: dict[str, Any]) -> int:
    return int(
        usage["input_tokens"]
        + (usage.get("cache_read_input_tokens") or 0)
        + (usage.get("cache_creation_input_tokens") or 0)
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Runs the demo once on the slice; the database, the log and the output, for every test."""
    from ember.config import database_url

    server = database_url()
    out = tmp_path_factory.mktemp("demo")
    name = f"ember_demo_t_{os.getpid()}"
    saved = os.environ.get("DATABASE_URL")
    os.environ["DATABASE_URL"] = server
    try:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = ember_main(
                ["demo", "--threads", SLICE, "--database", name, "--port", "0",
                 "--out", str(out), "--plain"]
            )  # fmt: skip
        url = with_database(server, name)
        with psycopg.connect(url, autocommit=True) as conn:
            summary = conn.execute(
                "SELECT to_jsonb(s) FROM ember.comparison_summary AS s"
            ).fetchone()
        log = [
            json.loads(line)
            for line in (out / SIM_LOG).read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
        yield {
            "code": code,
            "url": url,
            "out": out,
            "stdout": printed.getvalue(),
            "log": log,
            "summary": summary[0] if summary else None,
        }
    finally:
        if saved is None:
            os.environ.pop("DATABASE_URL", None)
        else:
            os.environ["DATABASE_URL"] = saved
        drop_database(server, name)


def test_the_demo_finishes_and_prints_the_report_path_last(demo: dict[str, Any]) -> None:
    assert demo["code"] == 0
    lines = [line for line in demo["stdout"].splitlines() if line.strip()]
    assert lines[-1] == f"report: {demo['out'] / REPORT}"
    assert (demo["out"] / REPORT).read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert "offline, rule-based stand-in" in demo["stdout"]
    assert "ANTHROPIC_API_KEY" in demo["stdout"] and "ANTHROPIC_BASE_URL unset" in demo["stdout"]


def test_the_steward_writes_facts_with_evidence(demo: dict[str, Any]) -> None:
    with psycopg.connect(demo["url"]) as conn:
        facts, with_evidence, accepted = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE EXISTS ("
            "   SELECT 1 FROM ember.fact_evidence AS e WHERE e.fact_id = f.id)),"
            " count(*) FILTER (WHERE evidence_kind = 'user-accepted')"
            " FROM ember.facts AS f WHERE status = 'active'"
        ).fetchone()  # type: ignore[misc]
    assert facts > 0 and with_evidence == facts
    assert accepted >= 1, "the trip's accepted proposal is a user-accepted fact"


def test_shadow_proposes_on_both_paths(demo: dict[str, Any]) -> None:
    with psycopg.connect(demo["url"]) as conn:
        paths = dict(
            conn.execute(
                "SELECT r.path, count(*) FROM ember.shadow_proposals AS p"
                " INNER JOIN ember.shadow_runs AS r ON r.id = p.run_id"
                " WHERE p.validation_error IS NULL GROUP BY r.path"
            ).fetchall()
        )
    assert paths.get("hot", 0) > 0 and paths.get("cold", 0) > 0, paths


def test_a_hot_run_reads_the_old_prefix_from_the_cache(demo: dict[str, Any]) -> None:
    """Share = the shadow request's cache read / every input token of the host request whose
    messages it extends (markers aside: the hot path adds one, and markers are not hashed)."""
    log = [e for e in demo["log"] if e["status"] == 200 and e["path"] == "/v1/messages"]
    host = [e for e in log if e["headers"].get("x-ember-sim-responder") == HOST_RESPONDER]
    shares = []
    for entry in log:
        body = json.loads(entry["body_text"])
        names = [t["name"] for t in body.get("tools") or []]
        if entry in host or SHADOW_TOOL_NAME not in names or "system" not in body:
            continue
        messages = _strip_markers(body["messages"])
        old = [
            h
            for h in host
            if (hm := _strip_markers(json.loads(h["body_text"])["messages"])) == messages[: len(hm)]
        ]
        if old:
            shares.append(
                entry["usage"]["cache_read_input_tokens"] / _total_input(old[-1]["usage"])
            )
    assert shares and max(shares) >= 0.95, shares


def test_the_interrupted_shadow_turn_is_cancelled_with_no_proposals(demo: dict[str, Any]) -> None:
    with psycopg.connect(demo["url"]) as conn:
        rows = conn.execute(
            "SELECT r.id, r.error, count(p.id) FROM ember.shadow_runs AS r"
            " LEFT JOIN ember.shadow_proposals AS p ON p.run_id = r.id"
            " WHERE r.status = 'cancelled' GROUP BY r.id, r.error"
        ).fetchall()
    assert rows, "no cancelled run"
    assert all(count == 0 for _, _, count in rows)
    assert any(error == "interrupted-by-user" for _, error, _ in rows)


def test_nothing_from_the_isolated_thread_reaches_the_simulator(demo: dict[str, Any]) -> None:
    corpus = load_corpus()
    journal = [m["content"] for m in corpus.messages if m["thread"] == "private-journal"]
    with psycopg.connect(demo["url"]) as conn:
        stored = conn.execute(
            "SELECT count(*) FROM ember.messages WHERE thread_id = 'private-journal'"
        ).fetchone()
    assert stored == (len(journal),), "the journal was played"
    assert demo["log"], "the simulator received requests"
    for entry in demo["log"]:
        assert corpus.isolated_marker not in entry["body_text"]
        assert not any(text in entry["body_text"] for text in journal)


def test_the_health_thread_goes_only_to_models_tagged_for_health(demo: dict[str, Any]) -> None:
    corpus = load_corpus()
    health = [m["content"] for m in corpus.messages if m["thread"] == "knee-rehab"]
    with psycopg.connect(demo["url"]) as conn:
        tagged = {
            r[0] for r in conn.execute("SELECT id FROM ember.models WHERE 'health' = ANY (tags)")
        }
    sent = [
        (json.loads(e["body_text"])["model"], e["headers"].get("x-ember-sim-responder"))
        for e in demo["log"]
        if any(text in e["body_text"] for text in health)
    ]
    assert sent, "the health thread was read by someone"
    assert {model for model, _ in sent} <= tagged, (sent, tagged)
    # Ember's own reader of it (not the host's turns) is the light model the demo tagged.
    assert (corpus.category.light_model, None) in sent


def test_the_summary_keeps_exact_evidence_and_semantic_coverage_apart(demo: dict[str, Any]) -> None:
    summary = demo["summary"]
    assert summary is not None and summary["facts"] > 0
    for column in ("exact_coverage", "evidence_coverage", "semantic_coverage"):
        assert summary[column] is not None, column
    assert summary["semantic_covered_facts"] >= 1, "the judge paired something"
    for label in ("exact coverage", "evidence coverage", "semantic coverage"):
        assert label in demo["stdout"]


def test_a_previous_report_is_kept_under_a_dated_name(tmp_path: Path) -> None:
    report = tmp_path / REPORT
    assert keep_previous(report) is None
    report.write_text("first run", encoding="utf-8")
    kept = keep_previous(report)
    assert kept is not None and not report.exists()
    assert kept.read_text(encoding="utf-8") == "first run"
    assert kept.name.startswith("ember-demo-report-") and kept.suffix == ".html"


def test_a_taken_port_moves_the_simulator_and_says_so(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        clock = DemoClock(timedelta())
        sim, note = start_sim(Heuristic(), Scripted(), clock, port, tmp_path / "log.jsonl")
        try:
            assert sim.port != port
            assert note is not None and str(port) in note and str(sim.port) in note
        finally:
            sim.stop()


def test_the_corpus_is_an_import_file(db: str) -> None:
    """`ember import` takes the corpus whole (once its category exists), and nothing is rejected."""
    from ember.transfer import run_import

    corpus = load_corpus()
    with psycopg.connect(db) as conn:
        conn.execute("SELECT ember.define_category(%s)", (corpus.category.name,))
        conn.commit()
        result = run_import(conn, corpus.directory / "demo.jsonl", partial=False, progress=False)
    assert result.rejected == []
    assert result.written
    assert (result.threads, result.messages) == (len(corpus.threads), len(corpus.messages))


def test_the_demo_cuts_a_thread_over_and_resolves_a_contradiction(demo: dict[str, Any]) -> None:
    with psycopg.connect(demo["url"]) as conn:
        (scope, promoted, steward_read_tail) = conn.execute(
            "SELECT c.scope || ':' || c.scope_value,"
            " (SELECT count(*) FROM ember.cutover_promotions AS p"
            "  WHERE p.cutover_id = c.id AND p.outcome = 'promoted'),"
            " (SELECT count(*) FROM ember.messages AS m WHERE m.thread_id = c.scope_value"
            "  AND m.seq > c.from_seq AND m.episode_id IS NOT NULL)"
            " FROM ember.cutovers AS c"
        ).fetchone()  # type: ignore[misc]
        superseded = conn.execute(
            "SELECT o.text, n.text, n.cutover_id IS NOT NULL, o.valid_until = n.valid_from"
            " FROM ember.facts AS o JOIN ember.facts AS n ON n.id = o.superseded_by"
        ).fetchall()
    assert scope == "thread:trip-lisbon"
    assert promoted >= 1, "shadow's proposal about the thread's new row became a fact"
    assert steward_read_tail == 0, "the steward read nothing of the thread after the point"
    assert len(superseded) == 1
    old, new, promoted_fact, closed = superseded[0]
    assert "Berlin" in old and "Lisbon" in new and promoted_fact and closed
    assert "cut-over of trip-lisbon:" in demo["stdout"]
    assert "contradiction resolved:" in demo["stdout"] and "Berlin" in demo["stdout"]
