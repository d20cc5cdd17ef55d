"""The operator's commands: `ember init`, `ember settings`, `ember forget` and `ember search`, each
a thin client of its SQL function, with Ember's refusals as one line and a documented exit code."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import psycopg

from ember.cli import EXIT_REFUSED, EXIT_USAGE
from forgetkit import append, insert_fact
from workerkit import EMBER

ROOT = Path(__file__).resolve().parents[1]


def ember(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": db}
    return subprocess.run([EMBER, *args], env=env, capture_output=True, text=True, timeout=60)


def refused(out: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    for word in words:
        assert word in lines[0], lines[0]


def test_init_makes_the_one_time_calls_once_and_says_what_it_did(db: str) -> None:
    args = ["init", "--category", "health=medical matters", "--main", "main"]
    tag = ["--tag", "claude-haiku-4-5=health"]
    first = ember(db, *args, "--main-model", "claude-sonnet-4-6", *tag)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [
        'ok    tenant "default" exists',
        'done  category "health" defined',
        'done  main thread "main" created (model claude-sonnet-4-6)',
        'done  the steward\'s thread "memory-steward" created (model "claude-sonnet-4-6", copied'
        " from main)",
        first.stdout.splitlines()[4],
        "done  model claude-haiku-4-5 tagged for health",
    ]
    assert first.stdout.splitlines()[4].startswith("done  shadow memory activated")
    other = ember(db, "init", "--tenant", "no space")
    refused(other, EXIT_REFUSED, "EM151")
    again = ember(db, *args, *tag)
    assert again.returncode == 0, again.stderr
    assert all(line.startswith("ok  ") for line in again.stdout.splitlines()), again.stdout
    refused(ember(db, "init", "--tag", "claude-haiku-4-5"), EXIT_USAGE, "MODEL=CATEGORY")
    refused(ember(db, "init", "--tag", "no-such-model=health"), EXIT_REFUSED, "EM009")


def test_settings_are_listed_shown_and_changed_only_to_valid_values(db: str) -> None:
    listed = ember(db, "settings")
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"^idle_before_digest +20 minutes +a thread idle", listed.stdout, re.M)

    shown = ember(db, "settings", "failure_backoff")
    assert shown.stdout.splitlines() == [
        "value    6 hours",
        "default  6 hours",
        "type     interval, 0 seconds to 30 days",
        "meaning  how long a thread waits after repeated failures",
    ]

    changed = ember(db, "settings", "idle_before_digest", "5 minutes")
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout.strip() == (
        "idle_before_digest: 20 minutes -> 5 minutes (default 20 minutes)"
    )
    assert "5 minutes (default 20 minutes)" in ember(db, "settings").stdout

    for key, value, says in (
        ("idle_before_digest", "5 minuets", '"5 minuets" is not an interval'),
        ("idle_before_digest", "-1 minute", "out of range (from 0 seconds to 30 days)"),
        ("failure_backoff_after", "two", '"two" is not a whole number'),
        ("failure_backoff_after", "0", "0 is out of range (from 1 to 1000)"),
        ("hot_cache_min_read_share", "1.5", "out of range (from 0 to 1)"),
    ):
        refused(ember(db, "settings", key, value), EXIT_REFUSED, "EM092", key, says)
    refused(ember(db, "settings", "no_such", "1"), EXIT_REFUSED, "EM014", "no_such")
    refused(ember(db, "settings", "no_such"), EXIT_USAGE, "unknown setting 'no_such'")
    with psycopg.connect(db) as conn:
        values = dict(conn.execute("SELECT key, value FROM ember.settings").fetchall())
    assert values["idle_before_digest"] == "5 minutes"
    assert values["failure_backoff_after"] == 3, "refused values leave the old one"


def test_every_setting_is_documented_with_its_default(db: str) -> None:
    """docs/operations.md holds one table of every setting: its default as Ember ships it."""
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    section = text.split("## Settings", 1)[1].split("\n## ", 1)[0]
    documented = {
        m.group(1): m.group(2).strip()
        for m in re.finditer(r"^\| `([a-z0-9_]+)` \| ([^|]+) \|", section, re.M)
    }
    with psycopg.connect(db) as conn:
        shipped = {
            key: str(default) if not isinstance(default, str) else default
            for key, default in conn.execute(
                "SELECT key, default_value FROM ember.settings_list()"
            ).fetchall()
        }
    assert documented == shipped


def _snapshot(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """A digest of every table of schema ember: any change to any row changes it."""
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'ember'::regnamespace"
            " AND relkind = 'r' ORDER BY 1"
        )
    ]
    digest = {}
    for table in tables:
        query = psycopg.sql.SQL(
            "SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), ''))"
            " FROM ember.{} AS t"
        ).format(psycopg.sql.Identifier(table))
        row = conn.execute(query).fetchone()
        digest[table] = f"{row[0]}:{row[1]}" if row else ""
    return digest


def test_forget_dry_run_prints_what_would_go_and_changes_nothing(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT ember.create_thread('default', 'knee', 'side', 'Knee rehab')")
        said = append(conn, "knee", "user", "I prefer morning physio sessions.")
        append(conn, "knee", "assistant", "Booked mornings from now on.")
        fact = insert_fact(conn, "Prefers morning physio.", "user-stated", [said])
        before = _snapshot(conn)

    dry = ember(db, "forget", "--thread", "knee", "--reason", "the user asked", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[0].startswith("would erase 2 rows: ")
    assert f"1 retired as source-forgotten [{fact}]" in dry.stdout
    assert "dry run: nothing was changed" in dry.stdout
    with psycopg.connect(db, autocommit=True) as conn:
        assert _snapshot(conn) == before, "a dry run changes no row of any table"

    done = ember(db, "forget", "--messages", str(said), "--reason", "the user asked")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"erased 1 rows: {said}"
    with psycopg.connect(db, autocommit=True) as conn:
        status = conn.execute("SELECT status FROM ember.facts WHERE id = %s", (fact,)).fetchone()
        assert status and status[0] == "retired"
    refused(ember(db, "forget", "--messages", "x", "--reason", "r"), EXIT_USAGE, "message ids")
    refused(ember(db, "forget", "--thread", "nope", "--reason", "r"), EXIT_REFUSED, "EM095", "nope")
    refused(ember(db, "forget", "--thread", "knee", "--reason", " "), EXIT_REFUSED, "EM097")


def test_search_answers_as_the_viewer_its_labels_allow(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("SELECT ember.define_category('health')")
        conn.execute("SELECT ember.tag_model('claude-opus-4-6', 'health')")
        conn.execute(
            "SELECT ember.create_thread('default', 'knee', 'side', 'Knee', 'health', 'open',"
            " 'claude-opus-4-6')"
        )
        conn.execute(
            "SELECT ember.create_thread("
            "'default', 'trip', 'side', 'Trip', NULL, 'open', 'claude-sonnet-4-6')"
        )
        knee = append(conn, "knee", "user", "I prefer morning physio sessions.")
        trip = append(conn, "trip", "user", "I prefer morning trains.")
        for text, message, labels, source in (
            ("Prefers morning physio sessions.", knee, ["health"], "knee"),
            ("Prefers morning trains.", trip, [], "trip"),
        ):
            fact = insert_fact(conn, text, "user-stated", [message])
            conn.execute(
                "UPDATE ember.facts SET categories = %s, source_threads = %s WHERE id = %s",
                (labels, [source], fact),
            )

    def found(viewer: str) -> list[str]:
        out = ember(db, "search", "morning", "--viewer", viewer)
        assert out.returncode == 0, out.stderr
        return sorted(re.findall(r"Prefers morning \w+", out.stdout))

    assert found("trip") == ["Prefers morning trains"], "a health fact is never shown to trip"
    assert found("knee") == ["Prefers morning physio", "Prefers morning trains"]
    assert found("human") == ["Prefers morning physio", "Prefers morning trains"]
    assert "[health]" in ember(db, "search", "physio", "--viewer", "knee").stdout
    assert "no fact that trip may read" in ember(db, "search", "physio", "--viewer", "trip").stdout
    refused(ember(db, "search", "x", "--viewer", "nobody"), EXIT_REFUSED, "EM029")
    refused(ember(db, "search", "x", "--viewer", "trip", "--limit", "0"), EXIT_REFUSED, "EM068")
