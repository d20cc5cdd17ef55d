"""search_memory's text side alone on the recall sets of bench/b9_search.py: Chinese facts found
by 2-4 character partial words (target >= 90% in the top 5), and natural-language questions in
English and Chinese (target >= 80%). Deterministic, so a test; the timings are B9's."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg

DATA = Path(__file__).resolve().parents[1] / "bench" / "data"


def _recall(url: str, set_name: str, key: str) -> float:
    zh = json.loads((DATA / "search_zh_partial.json").read_text())["facts"]
    qa = json.loads((DATA / "search_questions.json").read_text())["facts"]
    cases = {"zh": zh, "qa": qa}[set_name]
    with psycopg.connect(url, autocommit=True) as conn:
        ids = {}
        for text in dict.fromkeys(f["text"] for f in zh + qa):
            row = conn.execute(
                "INSERT INTO ember.facts (text, evidence_kind) VALUES (%s, 'user-stated')"
                " RETURNING id",
                (text,),
            ).fetchone()
            assert row is not None
            ids[text] = row[0]
        conn.execute("ANALYZE ember.facts")
        asked = answered = 0
        for fact in cases:
            for query in fact[key]:
                found = [
                    r[0]
                    for r in conn.execute(
                        "SELECT fact_id FROM ember.search_memory('default', 'human', %s, NULL, 5)",
                        (query,),
                    )
                ]
                asked += 1
                answered += ids[fact["text"]] in found
    return answered / asked


def test_chinese_partial_words_find_their_facts(db: str) -> None:
    assert _recall(db, "zh", "queries") >= 0.9


def test_questions_find_their_facts_by_words_alone(db: str) -> None:
    assert _recall(db, "qa", "questions") >= 0.8
