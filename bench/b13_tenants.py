"""B13: what tenants cost the host, against the release before them, in the same run.

Two scratch databases on the same server: one migrated with the migrations and functions of
commit 61de82c (the last before tenants, taken from this repository's history, so the ratio is
what tenants themselves cost and not what other changes since did), one with this tree's. The same host calls run on both, interleaved in rounds so a noisy neighbour slows
both alike: append_message one row per autocommit statement, append_messages of 500 rows,
turn_started and turn_ended, and start_generation. The ratio is this tree's time over the old
release's; the target (issue 40) is ≤ 1.1 for each.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
from _support import verdict, write_section

from ember.config import database_url
from ember.devsetup import drop_database, fresh_database
from ember.embedded import project_root

BEFORE_TENANTS = "61de82c"
ROUNDS = 20
SINGLE = 100
BULK_ROWS = 2000
TURNS = 50
GENERATIONS = 20
TEXT = "an ordinary assistant reply of a realistic length, about one line of text"


def _old_root(into: Path) -> Path:
    archive = subprocess.run(
        [
            "git",
            "-C",
            str(project_root()),
            "archive",
            "--format=tar",
            BEFORE_TENANTS,
            "db",
            "functions",
        ],
        capture_output=True,
        check=True,
    )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


# The host's calls as each side spells them: before tenants without one, now with the tenant
# first (the one a single-person database holds).
QUERIES = {
    "old": {
        "append": "SELECT ember.append_message('w', 'assistant', %s)",
        "bulk": "SELECT ember.append_messages('w', %s::json)",
        "started": "SELECT ember.turn_started('w')",
        "ended": "SELECT ember.turn_ended('w', true)",
        "generation": "SELECT ember.start_generation('g')",
        "thread": "SELECT ember.create_thread(%s, 'side')",
    },
    "new": {
        "append": "SELECT ember.append_message('default', 'w', 'assistant', %s)",
        "bulk": "SELECT ember.append_messages('default', 'w', %s::json)",
        "started": "SELECT ember.turn_started('default', 'w')",
        "ended": "SELECT ember.turn_ended('default', 'w', true)",
        "generation": "SELECT ember.start_generation('default', 'g')",
        "thread": "SELECT ember.create_thread('default', %s, 'side')",
    },
}


def _calls(conn: psycopg.Connection, side: str) -> dict[str, Callable[[int], None]]:
    q = QUERIES[side]

    def single(r: int) -> None:
        for i in range(SINGLE):
            conn.execute(q["append"], (f"{TEXT} {r}.{i}",))

    def bulk(r: int) -> None:
        rows = [
            {"role": "assistant" if i % 2 else "user", "content": f"{TEXT} b{r}.{i}"}
            for i in range(BULK_ROWS)
        ]
        conn.execute(q["bulk"], (json.dumps(rows),))

    def turns(_: int) -> None:
        for _i in range(TURNS):
            conn.execute(q["started"])
            conn.execute(q["ended"])

    def generations(_: int) -> None:
        for _i in range(GENERATIONS):
            conn.execute(q["generation"])

    return {
        "append_message": single,
        "append_messages": bulk,
        "turn_started + turn_ended": turns,
        "start_generation": generations,
    }


UNITS = {
    "append_message": (SINGLE, "rows"),
    "append_messages": (BULK_ROWS, "rows"),
    "turn_started + turn_ended": (TURNS, "pairs"),
    "start_generation": (GENERATIONS, "calls"),
}


def main() -> None:
    base = database_url()
    load = os.getloadavg()
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    commit = subprocess.run(
        ["git", "-C", str(project_root()), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        old_root = _old_root(Path(tmp))
        old_url, _ = fresh_database(base, "ember_bench_b13_old", root=old_root, pgtap=False)
        new_url, _ = fresh_database(base, "ember_bench_b13_new", root=project_root(), pgtap=False)
    try:
        with (
            psycopg.connect(old_url, autocommit=True) as old,
            psycopg.connect(new_url, autocommit=True) as new,
        ):
            for side, conn in (("old", old), ("new", new)):
                for thread in ("w", "g"):
                    conn.execute(QUERIES[side]["thread"], (thread,))
            sides = {"old": _calls(old, "old"), "new": _calls(new, "new")}
            spent = {side: dict.fromkeys(UNITS, 0.0) for side in sides}
            for r in range(ROUNDS):
                for name in UNITS:
                    order = ("old", "new") if r % 2 == 0 else ("new", "old")
                    for side in order:
                        start = time.perf_counter()
                        sides[side][name](r)
                        spent[side][name] += time.perf_counter() - start
            tenants = new.execute("SELECT count(*) FROM ember.tenants").fetchone()
            assert tenants == (1,)
    finally:
        drop_database(base, "ember_bench_b13_old")
        drop_database(base, "ember_bench_b13_new")

    lines = [
        "## B13: tenants on the host's path",
        "",
        f"This tree against the release before tenants ({BEFORE_TENANTS}), two scratch databases "
        "on one server,",
        f"the same calls interleaved in {ROUNDS} rounds (the side that goes first alternates). "
        f"Load average at the start: {load[0]:.2f}. Run on {started}, commit {commit}.",
        "",
        "| call | before tenants | with tenants | ratio | target |",
        "|---|---|---|---|---|",
    ]
    for name, (per_round, unit) in UNITS.items():
        n = per_round * ROUNDS
        old_rate = n / spent["old"][name]
        new_rate = n / spent["new"][name]
        ratio = spent["new"][name] / spent["old"][name]
        print(
            f"B13 {name}: before {old_rate:,.0f} {unit}/s, with tenants {new_rate:,.0f} {unit}/s, "
            f"ratio {ratio:.2f}"
        )
        lines.append(
            f"| `{name}` ({n:,} {unit}) | {old_rate:,.0f} {unit}/s | {new_rate:,.0f} {unit}/s | "
            f"{ratio:.2f} | ≤ 1.1: {verdict(ratio, 1.1)} |"
        )
    write_section("b13", "\n".join(lines))


if __name__ == "__main__":
    main()
