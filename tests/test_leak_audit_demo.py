"""The leak audit over the demo's whole corpus: every request the simulator received while
`ember demo`'s run played it, read back and checked one by one.

The corpus is the one `make demo` loads (examples/corpus, by ember.demo.corpus.load_corpus),
with more isolated and health threads cloned from its journal and its knee-rehab thread, each
row carrying a marker of its own. The run is the demo's own (ember.demo.run.Demo): the corpus
played through the host API, `ember worker` (shadow hot and cold, steward, consolidation) as a
separate process over HTTP to the simulator, the interrupted shadow turn, the light model tagged
for health halfway, the drain, and the semantic judge. Then no request may carry an isolated
row, a health row may go only to a model tagged for health when the request arrived, and the
API key may appear in no body and no line of the worker's log.
"""

from __future__ import annotations

import argparse
import json
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ember.demo.corpus import HOST_RESPONDER, Corpus, load_corpus, parse_time
from ember.demo.run import SIM_LOG, Demo, Display, start_sim
from ember.sim import LoggedRequest
from ember.tools import SHADOW_TOOL_NAME
from reliability import record
from workerkit import API_KEY, ROOT

CLONES = 6  # more isolated threads and more health threads, each cloned this many times
ISOLATED_FROM = "private-journal"
HEALTH_FROM = "knee-rehab"


def _marked(text: str, marker: str) -> str:
    """The row's text with its marker inside its sentence, so a statement drawn from it
    carries the marker too."""
    body = text.rstrip()
    end = body[-1] if body and body[-1] in ".!?" else ""
    return f"{body[: len(body) - len(end)]} ({marker}){end or '.'}"


def _clone(corpus: Corpus, source: str, new_id: str, marker: str, shift: timedelta) -> None:
    """Thread `source` copied as `new_id`, `shift` later, every row marked."""

    def later(when: str) -> str:
        return (parse_time(when) + shift).isoformat().replace("+00:00", "Z")

    thread = {**corpus.thread(source), "id": new_id, "title": f"{new_id} ({marker})"}
    thread["created_at"] = later(thread["created_at"])
    corpus.threads.append(thread)
    for g in [g for g in corpus.generations if g["thread"] == source]:
        corpus.generations.append({**g, "thread": new_id, "started_at": later(g["started_at"])})
    for m in [m for m in corpus.messages if m["thread"] == source]:
        content = _marked(m["content"], marker)
        blocks = m["blocks"]
        if blocks is not None:
            parsed = json.loads(blocks)
            for b in parsed:
                if b.get("type") == "text":
                    b["text"] = _marked(b["text"], marker)
            blocks = json.dumps(parsed)
        corpus.messages.append(
            {**m, "thread": new_id, "content": content, "blocks": blocks,
             "created_at": later(m["created_at"])}
        )  # fmt: skip


def _system_text(body: dict[str, Any]) -> str:
    system = body.get("system")
    if isinstance(system, list):
        return "".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    return str(system or "")


def _prompt_start(name: str) -> str:
    return (ROOT / "prompts" / f"{name}.md").read_text(encoding="utf-8").strip()[:200]


def _kind(entry: LoggedRequest, starts: dict[str, str]) -> str:
    """Who sent the request: the host's own turn, or which of Ember's readers."""
    body = entry.body if isinstance(entry.body, dict) else {}
    if entry.headers.get("x-ember-sim-responder") == HOST_RESPONDER:
        return "host"
    system = _system_text(body)
    for kind, start in starts.items():
        if system.startswith(start):
            return kind
    if SHADOW_TOOL_NAME in [t.get("name") for t in body.get("tools") or []]:
        return "shadow hot"
    return "other"


def test_the_leak_audit_of_every_request_over_the_demo_corpus(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = load_corpus()
    token = secrets.token_hex(4)
    isolated_markers, health_markers = [corpus.isolated_marker], []
    for n in range(1, CLONES + 1):
        shift = timedelta(minutes=3 * n)
        isolated_markers.append(f"ISOLATED-{n}-{token}")
        _clone(corpus, ISOLATED_FROM, f"journal-{n}", isolated_markers[-1], shift)
        health_markers.append(f"HEALTH-{n}-{token}")
        _clone(corpus, HEALTH_FROM, f"rehab-{n}", health_markers[-1], shift)
    sealed = {t["id"] for t in corpus.threads if t["seal_tier"] == "isolated"}
    isolated_rows = [m["content"] for m in corpus.messages if m["thread"] in sealed]
    health_rows = [m["content"] for m in corpus.messages if m["thread"] in corpus.category_threads]
    assert len(sealed) == len(corpus.category_threads) == CLONES + 1
    assert all(parse_time(t["created_at"]) < corpus.now for t in corpus.threads)

    # The demo's own environment, offline: the simulator answers every model, and the worker and
    # the judge send the test's API key (so that the audit can look for it in every body).
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # replaced by the sim's URL
    args = argparse.Namespace(database=None, port=0, out=str(tmp_path), plain=True)
    display = Display(live=False)
    demo = Demo(args, corpus, tmp_path, display)
    assert demo.use_sim
    sim, _ = start_sim(demo.held, demo.host_script, demo.clock, 0, tmp_path / SIM_LOG)

    # The light model is tagged for health halfway through the run: a request that arrived
    # before that may carry health rows only to the host's model, tagged from the start.
    tagged_at: list[int] = []
    tag_light_model = demo.tag_light_model

    def tag_and_mark() -> None:
        tagged_at.append(max((e.seq for e in sim.requests), default=0))
        tag_light_model()

    demo.tag_light_model = tag_and_mark  # type: ignore[method-assign]
    try:
        demo.run(db, sim)
    finally:
        demo.close()
        sim.stop()
    requests = list(sim.requests)
    logged = (tmp_path / SIM_LOG).read_text(encoding="utf-8").splitlines()
    worker_log = (tmp_path / "worker.log").read_text(encoding="utf-8", errors="replace")

    with psycopg.connect(db, autocommit=True) as conn:
        tagged_end = {
            r[0] for r in conn.execute("SELECT id FROM ember.models WHERE 'health' = ANY (tags)")
        }
        runs = dict(
            conn.execute(
                "SELECT 'shadow ' || path || ' ' || status, count(*) FROM ember.shadow_runs"
                " GROUP BY 1 UNION ALL SELECT 'steward ' || status, count(*)"
                " FROM ember.steward_runs GROUP BY 1 UNION ALL"
                " SELECT 'consolidation ' || status, count(*) FROM ember.consolidation_runs"
                " GROUP BY 1"
            ).fetchall()
        )
        stored = conn.execute(
            "SELECT count(*) FROM ember.messages WHERE thread_id = ANY (%s)",
            ([t["id"] for t in corpus.threads],),
        ).fetchone()
    cat = corpus.category
    tagged_before = tagged_end - {cat.light_model}
    assert cat.host_model in tagged_before and cat.light_model in tagged_end
    assert len(tagged_at) == 1

    starts = {
        "shadow cold": _prompt_start("cold_reader"),
        "steward": _prompt_start("steward"),
        "consolidation": _prompt_start("consolidation"),
        "judge": _prompt_start("semantic_judge"),
    }
    kinds: dict[str, int] = {}
    health_to: dict[str, int] = {}
    isolated = labelled_untagged = with_health = key_in_body = 0
    for entry in requests:
        text = entry.text
        kind = _kind(entry, starts)
        kinds[kind] = kinds.get(kind, 0) + 1
        model = (entry.body or {}).get("model") if isinstance(entry.body, dict) else None
        if any(m in text for m in isolated_markers) or any(r in text for r in isolated_rows):
            isolated += 1
        if any(m in text for m in health_markers) or any(r in text for r in health_rows):
            with_health += 1
            health_to[str(model)] = health_to.get(str(model), 0) + 1
            allowed = tagged_before if entry.seq <= tagged_at[0] else tagged_end
            labelled_untagged += model not in allowed
        key_in_body += API_KEY in text

    # Not vacuous: the corpus was stored whole, and every reader sent requests.
    assert stored == (len(corpus.messages),)
    assert len(logged) == len(requests), "the JSONL log and the in-memory log agree"
    for kind in ("host", "shadow hot", "shadow cold", "steward", "consolidation", "judge"):
        assert kinds.get(kind, 0) > 0, (kind, kinds)
    assert runs.get("shadow hot completed", 0) > 0 and runs.get("shadow cold completed", 0) > 0
    assert health_to.get(cat.host_model, 0) > 0, "the host's turns of the health threads"
    assert health_to.get(cat.light_model, 0) > 0, "Ember's reader of them, once it was tagged"
    assert API_KEY not in worker_log
    assert (isolated, labelled_untagged, key_in_body) == (0, 0, 0)

    threads = len(corpus.threads)
    readers = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()) if k != "host")
    models = ", ".join(f"{m} ({n})" for m, n in sorted(health_to.items()))
    record(
        "leak-audit-demo",
        f"{len(requests)} requests while the demo ran on its corpus of {threads} threads"
        f" ({len(corpus.messages)} rows; {CLONES + 1} isolated and {CLONES + 1} health threads,"
        f" each row marked): {kinds['host']} host turns, {readers}; health content in"
        f" {with_health} ({models}), each checked against the models tagged when it arrived",
        len(requests),
        "0 with isolated content; 0 with labelled content to an untagged model;"
        " 0 with the API key in a body",
        "tests/test_leak_audit_demo.py",
    )
