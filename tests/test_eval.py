"""`ember eval` end to end as a user runs it: a real `ember eval` process, its `ember worker`
sidecar, `ember sim` answering over real HTTP, a fresh database; then the report in JSON, on the
terminal, and as HTML in headless Chromium. Also the dry run, the confirmation, and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from html import escape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import psycopg
import pytest

from browser import Chromium, read_png
from ember.config import with_database
from ember.devsetup import chromium_path, database_exists, drop_database
from ember.evaluation import formats, html
from ember.evaluation.report import EvalReport
from ember.sim import Heuristic, SimServer

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "eval"
LOCOMO = DATA / "locomo_small.json"
LME = DATA / "longmemeval_small.json"
EXCLUDE = DATA / "locomo_exclude.txt"
PLUMBING = (
    "These figures measure the plumbing, not a language model: every answer and verdict came "
    "from ember sim's rule-based responder."
)


def ember() -> list[str]:
    script = Path(sys.executable).with_name("ember")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ember.cli"]


def env(**extra: str) -> dict[str, str]:
    """No model key or endpoint unless given; the cheap test embedder in both processes."""
    out = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "tests"), out.get("PYTHONPATH")]))
    out["EMBER_EMBEDDER"] = "hashembed:HashEmbedder"
    out.update(extra)
    return out


@pytest.fixture
def database(server_url: str) -> Iterator[str]:
    name = f"ember_t_{os.getpid()}_eval"
    drop_database(server_url, name)
    yield name
    drop_database(server_url, name)
    drop_database(server_url, f"{name}_estimate")


def run_eval(*args: str, timeout: float = 300, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ember(), "eval", *args],
        env=env(**extra),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )


def test_locomo_offline_end_to_end(server_url: str, database: str, tmp_path: Path) -> None:
    out = tmp_path / "report"
    done = run_eval(
        str(LOCOMO), "--offline", "--exclude", str(EXCLUDE), "--database", database,
        "--out", str(out), "--json", "--top-k", "5",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report == json.loads((out / "eval.json").read_text())
    assert report["note"] == PLUMBING

    run = report["run"]
    assert (run["benchmark"], run["status"], run["top_k"]) == ("locomo", "completed", 5)
    assert (run["conversations"], run["questions"], run["excluded"]) == (2, 21, 2)
    assert run["calls"] == run["simulated_calls"] == 2 * 2 * 19  # answer + judge, per pipeline

    # Every category of the asked questions is counted, per pipeline, with its questions.
    bench = formats.load(LOCOMO)
    excluded = set(formats.read_exclusions(EXCLUDE))
    want = Counter(q.category for q in bench.questions if q.id not in excluded)
    for pipeline in ("steward", "shadow"):
        got = {
            r["category"]: r["questions"] for r in report["categories"] if r["pipeline"] == pipeline
        }
        assert got == dict(want)
    results = {r["question_id"]: r for r in report["questions"]}
    assert {q for q, r in results.items() if r["excluded"]} == excluded
    assert all(r["steward_status"] is None for q, r in results.items() if q in excluded)

    summary = {r["pipeline"]: r for r in report["pipelines"]}
    for r in summary.values():
        assert r["questions"] == 19 and r["failed"] == 0
        assert r["correct"] + r["wrong"] == 19
        assert r["context_tokens_mean"] > 0
        assert 0 < r["search_p50_ms"] <= r["search_p95_ms"]
        assert r["extraction_runs"] > 0 and r["extraction_usd"] > 0
        assert r["answer_usd"] > 0 and r["judge_usd"] > 0
        assert r["usd_per_correct"] == pytest.approx(
            (r["extraction_usd"] + r["answer_usd"]) / r["correct"], rel=1e-3
        )
    # The steward writes at most 20 facts a wake and reads conv-a's three sessions in one wake;
    # shadow reads each session in its own run. So shadow alone knows the last of them.
    disagreements = {d["question_id"]: d for d in report["disagreements"]}
    assert {"conv-a/14", "conv-a/15"} <= set(disagreements)
    shelter = disagreements["conv-a/14"]
    assert (shelter["steward"]["verdict"], shelter["shadow"]["verdict"]) == ("wrong", "correct")
    assert "dog shelter" in shelter["shadow"]["answer"] and shelter["steward"]["answer"]
    assert shelter["steward"]["reason"].startswith("missing from the answer")
    cited = [f for f in shelter["shadow"]["shown"] if f["cited"]]
    assert len(cited) == 1 and "dog shelter" in cited[0]["text"]
    assert cited[0]["proposal_id"] and cited[0]["fact_id"] is None
    assert [p["source"] for p in cited[0]["evidence"]] == ["D3:9"]
    assert cited[0]["evidence"][0]["at"].startswith("2023-08-15")
    assert all(f["fact_id"] and f["proposal_id"] is None for f in shelter["steward"]["shown"])

    url = with_database(server_url, database)
    with psycopg.connect(url) as conn:
        left = conn.execute(
            "SELECT (SELECT count(*) FROM ember.eval_promotions),"
            " (SELECT count(*) FROM ember.facts WHERE run_id IS NULL),"
            " (SELECT count(*) FROM ember.facts WHERE status = 'active'),"
            " (SELECT count(*) FROM ember.facts)"
        ).fetchone()
    assert left is not None and left[:3] == (0, 0, 0) and left[3] > 0, (
        "no fact ever came from a proposal, and every conversation's facts were retired"
    )

    # The HTML report, in a real browser: the section draws, fetches nothing, says what it is.
    page = out / "eval.html"
    parser = Tags()
    parser.feed(page.read_text())
    assert parser.fetches == [] and parser.ids >= {"eval", "eval-summary", "eval-categories"}
    assert parser.texts["eval-headline"] == PLUMBING
    assert parser.disagreements == len(report["disagreements"])
    exe = chromium_path()
    assert exe, "Chromium is missing: run `make setup`"
    with Chromium(exe) as browser:
        load = browser.load(page.as_uri(), "#eval-summary, #eval-categories, #eval-disagreements")
    assert load.console_errors == []
    assert [u for u in load.requests if u != page.as_uri()] == []
    assert [b["id"] for b in load.boxes] == [
        "eval-summary",
        "eval-categories",
        "eval-disagreements",
    ]
    for box in load.boxes:
        image = read_png(load.shots[box["id"]])
        dark = sum(
            1
            for y in range(image.height)
            for x in range(image.width)
            if min(image.pixel(x, y)) < 128
        )
        assert box["h"] > 20 and dark > 100, f"{box['id']} is blank"

    # `ember compare --html` on the same database includes the section.
    compared = tmp_path / "compare.html"
    done = subprocess.run(
        [*ember(), "compare", "--html", str(compared)],
        env=env(DATABASE_URL=url), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = compared.read_text()
    assert 'id="eval"' in text and escape(PLUMBING) in text


def test_longmemeval_offline_on_the_terminal(database: str, tmp_path: Path) -> None:
    done = run_eval(str(LME), "--database", database, "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == PLUMBING, "the report's first line says what the figures measure"
    assert "6 questions: 6 asked, 0 excluded" in lines[1]
    assert "offline: ember sim" in done.stderr  # no key and no endpoint: offline by itself
    table = done.stdout
    for category in (
        "single-session-user (abstention)",
        "knowledge-update",
        "temporal-reasoning",
        "multi-session",
        "single-session-assistant",
    ):
        assert category in table
    report = json.loads((tmp_path / "eval.json").read_text())
    verdicts = {
        r["question_id"]: (r["steward_verdict"], r["shadow_verdict"]) for r in report["questions"]
    }
    assert verdicts["lme-milk"] == ("correct", "correct")
    assert verdicts["lme-sister_abs"] == (
        "correct",
        "correct",
    )  # declines: nothing is said of a sister
    assert verdicts["lme-book"] == ("wrong", "wrong")  # only the assistant said it


@pytest.fixture
def endpoint() -> Iterator[SimServer]:
    """A model endpoint that counts what it receives: the dry run and a refusal call nothing."""
    with SimServer(responder=Heuristic()) as sim:
        yield sim


def test_the_dry_run_prints_the_estimate_and_calls_nothing(
    server_url: str, database: str, endpoint: SimServer
) -> None:
    full = run_eval(
        str(LOCOMO), "--dry-run", "--database", database,
        ANTHROPIC_BASE_URL=endpoint.base_url, ANTHROPIC_API_KEY="k",
    )  # fmt: skip
    assert full.returncode == 0, full.stderr
    assert "dry run: nothing was called, imported or stored" in full.stdout
    limited = run_eval(
        str(LOCOMO), "--dry-run", "--limit", "3", "--database", database,
        ANTHROPIC_BASE_URL=endpoint.base_url, ANTHROPIC_API_KEY="k",
    )  # fmt: skip
    assert limited.returncode == 0, limited.stderr
    assert len(endpoint.requests) == 0
    assert not database_exists(server_url, database)
    assert not database_exists(server_url, f"{database}_estimate")

    def rows(text: str) -> dict[str, tuple[int, float]]:
        out = {}
        for line in text.splitlines():
            parts = line.split()
            if parts and parts[0] in ("steward", "shadow", "answer", "judge"):
                out[parts[0]] = (int(parts[2].replace(",", "")), float(parts[-1].lstrip("$")))
        return out

    a, b = rows(full.stdout), rows(limited.stdout)
    assert set(a) == set(b) == {"steward", "shadow", "answer", "judge"}
    assert a["answer"][0] == 2 * 21 and b["answer"][0] == 2 * 3  # each question, per pipeline
    assert b["steward"][0] < a["steward"][0]  # conv-b is not imported for 3 questions
    assert all(usd > 0 for _, usd in a.values())
    assert "claude-haiku-4-5" in full.stdout and "claude-sonnet-4-5" in full.stdout


def test_above_the_threshold_a_real_endpoint_needs_a_yes(
    database: str, endpoint: SimServer, tmp_path: Path
) -> None:
    done = run_eval(
        str(LOCOMO), "--confirm-above", "0.01", "--database", database, "--out", str(tmp_path),
        ANTHROPIC_BASE_URL=endpoint.base_url, ANTHROPIC_API_KEY="k",
    )  # fmt: skip
    assert done.returncode == 2
    assert "above --confirm-above $0.01; pass --yes" in done.stderr
    assert "cost estimate" in done.stderr
    assert len(endpoint.requests) == 0, "nothing is called before the run is confirmed"


def test_a_configured_endpoint_runs_with_a_yes_and_is_recognized_as_the_simulator(
    database: str, endpoint: SimServer, tmp_path: Path
) -> None:
    """The path a real endpoint takes (ANTHROPIC_BASE_URL, a key, the estimate, a yes), against
    an `ember sim` started apart: the worker and both models call it, and its answers are known
    for the simulator's."""
    done = run_eval(
        str(LME), "--limit", "2", "--yes", "--confirm-above", "0", "--database", database,
        "--out", str(tmp_path), ANTHROPIC_BASE_URL=endpoint.base_url, ANTHROPIC_API_KEY="k",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "offline" not in done.stderr and done.stdout.splitlines()[0] == PLUMBING
    tools = Counter(
        str(t["name"]) for r in endpoint.requests if isinstance(r.body, dict)
        for t in r.body.get("tools") or []
    )  # fmt: skip
    assert tools["answer_question"] == tools["judge_answer"] == 4  # 2 questions x 2 pipelines
    assert tools["shadow_memory_propose"] > 0 and tools["write_fact"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([str(LOCOMO), "--exclude", str(LME)], "id(s) of the exclusion list name no question"),
        ([str(EXCLUDE)], "not JSON"),
        ([str(DATA / "missing.json")], "missing.json does not exist"),
        ([str(LOCOMO), "--limit", "0"], "--limit must be at least 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    done = run_eval(*args, "--offline", "--database", f"ember_t_{os.getpid()}_never")
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and done.stderr.startswith("ember eval: ")
    assert len(done.stderr.strip().splitlines()) == 1


class Tags(HTMLParser):
    """Ids, the text of the headline, disagreements, and anything the page would fetch or run."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.texts: dict[str, str] = {}
        self.fetches: list[str] = []
        self.disagreements = 0
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(str(a["id"]))
            self._in = str(a["id"])
            self.texts.setdefault(self._in, "")
        if "disagreement" in (a.get("class") or "").split():
            self.disagreements += 1
        for name in ("src", "href"):
            # A fragment link moves within the page and fetches nothing.
            if a.get(name) and not str(a[name]).startswith("#"):
                self.fetches.append(str(a[name]))
        if tag in ("script", "link", "img", "iframe", "object", "embed"):
            self.fetches.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in:
            self.texts[self._in] += data


def test_hostile_texts_stay_text_in_the_html() -> None:
    evil = '<script>alert(1)</script><img src="https://example.invalid/x.png">'
    side: dict[str, Any] = {
        "status": "judged", "answer": evil, "verdict": "wrong", "reason": evil,
        "shown": [{"rank": 1, "text": evil, "evidence_kind": evil, "cited": True,
                   "evidence": [{"source": evil, "at": "2023-05-08"}]}],
    }  # fmt: skip
    rep = EvalReport(
        run={"run_id": 1, "calls": 2, "simulated_calls": 2, "benchmark": "locomo",
             "status": "completed", "source": evil, "source_sha256": "0" * 64,
             "conversations": 1, "questions": 1, "excluded": 0, "question_limit": None,
             "top_k": 10, "answer_model": "a", "judge_model": "j"},
        summary=[],
        categories=[{"pipeline": "steward", "category": evil, "questions": 1, "correct": 0}],
        disagreements=[{"question_id": evil, "category": evil, "question": evil, "gold": evil,
                        "steward": side, "shadow": {**side, "verdict": "correct"}}],
        questions=[],
        extraction=[],
    )  # fmt: skip
    parser = Tags()
    parser.feed(html.section(rep))
    assert parser.fetches == []
    assert parser.disagreements == 1


def test_a_database_holding_anything_but_an_eval_is_never_recreated(db: str, empty_db: str) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT ember.create_thread('default', 'real', 'side')")
    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.orders (id int)")
    cases = (
        (db, "holds Ember memory that no ember eval wrote", "SELECT id FROM ember.threads"),
        (
            empty_db,
            "holds tables outside schema ember",
            "SELECT to_regclass('public.orders')::text",
        ),
    )
    for url, why, still in cases:
        name = str(psycopg.conninfo.conninfo_to_dict(url)["dbname"])
        done = run_eval(str(LME), "--offline", "--database", name)
        assert done.returncode == 9, done.stderr
        assert why in done.stderr
        with psycopg.connect(url) as conn:
            assert conn.execute(still).fetchone() in (("real",), ("orders",)), "left as it was"
    done = run_eval(str(LME), "--offline", "--database", "ember")
    assert done.returncode == 9 and "it is the configured database" in done.stderr
