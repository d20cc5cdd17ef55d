"""Each run records the sha256 of the prompt text it was sent with (issue 27), so an analyst can
group runs by prompt version: a real `ember worker` against `ember sim` records, for its shadow,
steward and consolidation runs, the digest of the prompts/ file's text as the request carried it
(what the simulator received), and a changed prompt text is a changed digest; an eval call
carries the digest of its prompt the same way.

The SQL rules (the EM140 refusal, the CHECK, the analyst's run list) are in
pgtap/045_shadow_submit_prompt_digest.sql and its siblings.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import anthropic
import psycopg
import pytest

from ember.evaluation import asking
from ember.sim import Heuristic, SimServer
from ember.worker import shadow, steward
from ember.worker.pipeline import Job
from hashembed import HashEmbedder
from workerkit import API_KEY, InProcessContext, WorkerProcess, host_on, offer_cold, prepare

ROOT = Path(__file__).resolve().parents[1]


def sha256_of_prompt(path: Path) -> str:
    """The digest of a prompt file as the worker sends it: its text, stripped, in UTF-8."""
    return hashlib.sha256(path.read_text(encoding="utf-8").strip().encode("utf-8")).hexdigest()


def system_texts(body: Any) -> list[str]:
    system = body.get("system") if isinstance(body, dict) else None
    if isinstance(system, str):
        return [system]
    return [b["text"] for b in system or [] if isinstance(b, dict) and "text" in b]


def _query(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql).fetchall()  # type: ignore[arg-type]


def _until(url: str, sql: str, *, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _query(url, sql)[0][0]:
            return
        time.sleep(0.3)
    raise AssertionError(f"not reached within {timeout}s: {sql}")


@pytest.fixture(name="sim")
def _sim() -> Iterator[SimServer]:
    with SimServer(responder=Heuristic()) as server:
        yield server


def test_a_worker_records_the_digest_of_the_prompt_text_it_sent(db: str, sim: SimServer) -> None:
    with host_on(db) as host:
        host.create_thread("main", "main")
        host.conn.execute("SELECT ember.set_thread_model('default', 'main', 'claude-haiku-4-5')")
        host.conn.execute("SELECT ember.ensure_steward_thread('default')")
        host.conn.execute("SELECT ember.shadow_activate()")
        for key in ("idle_before_digest", "consolidation_interval"):
            host.conn.execute("SELECT ember.set_setting(%s, %s)", (key, "0 seconds"))
        for thread in ("home", "music"):
            host.create_thread(thread, "side")
        host.append_message("home", "user", "I am based in Berlin.", author="human")
        host.append_message("music", "user", "I like jazz.", author="human")
        host.append_message("music", "user", "I hate jazz.", author="human")
        for thread in ("home", "music"):
            host.task_ended(thread)

    worker = WorkerProcess(
        db,
        sim.base_url,
        "--pipelines",
        "shadow,steward,consolidation",
        "--poll-interval",
        "1",
        env={
            "EMBER_EMBEDDER": "hashembed:HashEmbedder",
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(ROOT / "tests"), os.environ.get("PYTHONPATH")])
            ),
        },
    ).ready()
    try:
        _until(
            db,
            "SELECT EXISTS (SELECT 1 FROM ember.shadow_runs WHERE status = 'completed')"
            " AND EXISTS (SELECT 1 FROM ember.steward_runs WHERE status = 'completed')"
            " AND EXISTS (SELECT 1 FROM ember.consolidation_runs WHERE status = 'completed')",
        )
    finally:
        assert worker.stop() == 0

    sent = {
        hashlib.sha256(text.encode("utf-8")).hexdigest()
        for request in sim.requests
        for text in system_texts(request.body)
    }
    expected = {
        "shadow_runs": sha256_of_prompt(ROOT / "prompts" / "cold_reader.md"),
        "steward_runs": sha256_of_prompt(ROOT / "prompts" / "steward.md"),
        "consolidation_runs": sha256_of_prompt(ROOT / "prompts" / "consolidation.md"),
    }
    for table, digest in expected.items():
        recorded = _query(
            db, f"SELECT DISTINCT prompt_sha256 FROM ember.{table} WHERE status = 'completed'"
        )
        assert recorded == [(digest,)], f"{table}: {recorded}, the file's text gives {digest}"
        assert digest in sent, f"{table}: the digest is of a text the simulator never received"
    # The analyst reads the same digests through the run list, one group per prompt version.
    listed = _query(
        db,
        "SELECT path, prompt_sha256 FROM ember.comparison_run_list"
        " WHERE status = 'completed' GROUP BY 1, 2 ORDER BY 1",
    )
    assert listed == [
        ("cold", expected["shadow_runs"]),
        ("steward", expected["steward_runs"]),
    ]


@pytest.fixture(name="edited_prompts")
def _edited_prompts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of prompts/ the pipelines read instead; the cached texts are dropped both ways."""
    for path in (ROOT / "prompts").glob("*.md"):
        (tmp_path / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(shadow, "PROMPTS", tmp_path)
    monkeypatch.setattr(steward, "PROMPTS", tmp_path)
    shadow.prompt.cache_clear()
    steward.steward_prompt.cache_clear()
    try:
        yield tmp_path
    finally:
        shadow.prompt.cache_clear()
        steward.steward_prompt.cache_clear()


async def _run_one(url: str, base_url: str, pipeline: Any) -> Job:
    ctx = InProcessContext(url, base_url)
    async with ctx.connection() as conn:
        job = await pipeline.claim(conn, "test", timedelta(minutes=5))
    assert job is not None
    await pipeline.execute(job, ctx)
    await ctx.client.close()
    return job


def _digest_of(url: str, table: str, run_id: int) -> str:
    rows = _query(url, f"SELECT prompt_sha256 FROM ember.{table} WHERE id = {int(run_id)}")
    return str(rows[0][0])


def test_changing_a_prompt_text_changes_the_digest_the_run_records(
    db: str, sim: SimServer, edited_prompts: Path
) -> None:
    prepare(db, ["t1", "t2"])
    cold = edited_prompts / "cold_reader.md"
    before = sha256_of_prompt(cold)

    offer_cold(db, "t1", "I prefer tea over coffee.")
    first = asyncio.run(_run_one(db, sim.base_url, shadow.ShadowPipeline()))
    assert _digest_of(db, "shadow_runs", first.run_id) == before

    # A new process reads the edited text (the texts are read once per process).
    cold.write_text(cold.read_text(encoding="utf-8") + "\nPrefer short facts.\n", encoding="utf-8")
    shadow.prompt.cache_clear()
    after = sha256_of_prompt(cold)
    assert after != before
    offer_cold(db, "t2", "I live in Lisbon.")
    second = asyncio.run(_run_one(db, sim.base_url, shadow.ShadowPipeline()))
    assert _digest_of(db, "shadow_runs", second.run_id) == after
    assert sim.requests[-1].body["system"].endswith("Prefer short facts.")

    # The steward's prompt the same way: an edit is a new digest on the next process's runs.
    with host_on(db) as host:
        host.conn.execute("SELECT ember.ensure_steward_thread('default')")
        host.conn.execute("SELECT ember.set_setting('idle_before_digest', '0 seconds')")
    steward_md = edited_prompts / "steward.md"
    steward_md.write_text("Prefer short facts.\n\n" + steward_md.read_text(encoding="utf-8"))
    run = asyncio.run(_run_one(db, sim.base_url, steward.StewardPipeline(HashEmbedder())))
    recorded = _digest_of(db, "steward_runs", run.run_id)
    assert recorded == sha256_of_prompt(steward_md)
    assert recorded != sha256_of_prompt(ROOT / "prompts" / "steward.md")


def test_an_eval_call_carries_the_digest_of_the_prompt_text_it_sent(sim: SimServer) -> None:
    with anthropic.Anthropic(base_url=sim.base_url, api_key=API_KEY, max_retries=0) as client:
        answer = asking.call(
            client, "answer", asking.answer_request("claude-haiku-4-5", "Anything?", None, [])
        )
        judge = asking.call(
            client, "judge", asking.judge_request("claude-sonnet-4-5", "Q?", "pottery", "pottery")
        )
    for made, name in ((answer, "eval_answer.md"), (judge, "eval_judge.md")):
        # ember eval sends the file's text as it is, unstripped.
        text = (ROOT / "prompts" / name).read_text(encoding="utf-8")
        assert made.prompt_sha256 == hashlib.sha256(text.encode("utf-8")).hexdigest()
        assert made.record("q1", "steward")["prompt_sha256"] == made.prompt_sha256
    received = [
        hashlib.sha256(text.encode("utf-8")).hexdigest()
        for request in sim.requests[-2:]
        for text in system_texts(request.body)
    ]
    assert received == [answer.prompt_sha256, judge.prompt_sha256]


def test_a_hot_request_names_the_digest_of_the_shadow_question_it_carries() -> None:
    hot = shadow.build_hot_request(
        json.dumps({"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": "hi"}]}),
        json.dumps({"id": "msg_1", "content": [{"type": "text", "text": "Hello."}]}),
        ["m:1 user(human): hi"],
        last_turn_thinking=False,
    )
    question = json.loads(hot.body)["messages"][-1]["content"][-1]["text"]
    template = sha256_of_prompt(ROOT / "prompts" / "shadow_question.md")
    assert hot.prompt_sha256 == template
    assert question.startswith(shadow.prompt("shadow_question") + "\n\n")
