"""Every row of the CLI's exit-code table, each from a real `ember` process.

The table (ember.commands.base.EXIT_CODES, printed by `ember --help` and listed in
docs/development.md) is a contract with scripts: a test per row keeps it true.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

import comparedata
from ember.commands.base import EXIT_CODES
from ember.embedded import EmbeddedServer
from test_cli import ROOT, _closed_port, ember, one_line_failure


def _table_codes() -> set[int]:
    return {int(m[1]) for m in re.finditer(r"^\s*(\d+)  ", EXIT_CODES, re.MULTILINE)}


def test_the_table_lists_the_codes_this_file_walks() -> None:
    assert _table_codes() == set(range(13))


def test_0_success() -> None:
    out = ember("--help")
    assert out.returncode == 0 and "exit codes:" in out.stdout


def test_1_a_bug_is_unexpected_and_points_at_debug() -> None:
    # A command that fails in a way nobody planned for: the one row no input can reach.
    code = (
        "import sys, ember.commands.db as db\n"
        "def broken(args): raise RuntimeError('a bug')\n"
        "db.run = broken\n"
        "from ember.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, "db", "status"], capture_output=True, text=True, cwd=ROOT
    )
    one_line_failure(out, 1, "unexpected error: RuntimeError: a bug", "--debug")
    out = subprocess.run(
        [sys.executable, "-c", code, "db", "status", "--debug"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 1 and "Traceback" in out.stderr


def test_2_a_misspelt_flag_prints_the_subcommands_usage() -> None:
    out = ember("worker", "--concurency", "8")
    assert out.returncode == 2
    assert out.stderr.startswith("usage: ember worker"), out.stderr
    assert "unrecognized arguments: --concurency 8" in out.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("import", "/nonexistent/corpus.jsonl"),
        ("compare", "--html", "/no/such/dir/r.html"),
        ("export", "-o", "/no/such/dir/out.jsonl"),
    ],
    ids=["import-missing-file", "compare-html-no-dir", "export-no-dir"],
)
def test_2_a_missing_or_unwritable_path_is_named(db: str, args: tuple[str, ...]) -> None:
    out = ember(*args, url=db)
    one_line_failure(out, 2, args[-1])


def test_2_a_missing_api_key_names_the_variable(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        comparedata.seed_case(conn)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["DATABASE_URL"] = db
    for args in (("compare", "--semantic"), ("worker", "--pipelines", "shadow")):
        out = subprocess.run(
            [sys.executable, "-m", "ember.cli", *args],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 2, (args, out.stderr)
        assert "ANTHROPIC_API_KEY" in out.stderr and "Traceback" not in out.stderr


def test_3_the_embedded_server_is_not_running(tmp_path: Path) -> None:
    out = ember("db", "url", home=tmp_path)
    one_line_failure(out, 3, "not running", str(tmp_path))


def test_4_unreachable() -> None:
    out = ember("compare", url=f"postgresql://postgres@127.0.0.1:{_closed_port()}/x")
    one_line_failure(out, 4, "cannot reach 127.0.0.1:")


def test_5_authentication(server_url: str) -> None:
    params = psycopg.conninfo.conninfo_to_dict(server_url)
    bad = f"postgresql://nobody:wrong@{params['host']}:{params['port']}/postgres"
    one_line_failure(ember("export", url=bad), 5, "authentication to")


def test_6_malformed_url() -> None:
    one_line_failure(ember("explain", "1", url="postgresql://[oops"), 6, "malformed")


@pytest.mark.parametrize(
    "args",
    [
        ("compare",),
        ("export", "-o", "OUT"),
        ("explain", "1"),
        ("import", "FILE"),
        ("worker", "--pipelines", "shadow"),
    ],
    ids=["compare", "export", "explain", "import", "worker"],
)
def test_7_an_unmigrated_database_says_run_migrate(
    empty_db: str, tmp_path: Path, args: tuple[str, ...]
) -> None:
    target = tmp_path / "out.jsonl"
    source = tmp_path / "in.jsonl"
    source.write_text('{"format":"ember","version":1}\n')
    argv = [str(target) if a == "OUT" else str(source) if a == "FILE" else a for a in args]
    env = {**os.environ, "DATABASE_URL": empty_db, "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    out = subprocess.run(
        [sys.executable, "-m", "ember.cli", *argv],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 7, out.stderr
    assert "ember migrate" in out.stderr and "Traceback" not in out.stderr
    assert not target.exists(), "a failed export leaves no file that imports as an empty one"


def test_8_the_embedded_server_cannot_be_set_up(tmp_path: Path) -> None:
    home = tmp_path / "co$HOME"
    home.mkdir()
    one_line_failure(ember("db", "start", home=home), 8, "shell")


def test_9_refused(server_url: str) -> None:
    one_line_failure(ember("testdb", "--name", "mydata", url=server_url), 9, "refusing to wipe")


def test_10_partial_import_with_rejected_lines(db: str, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    lines = [
        {"format": "ember", "version": 1},
        {
            "type": "thread",
            "id": "t1",
            "kind": "side",
            "title": None,
            "category": None,
            "seal_tier": "open",
            "model": None,
            "status": "active",
            "created_at": "2030-01-01T10:00:00Z",
        },
        {"type": "thread", "id": "bad id with spaces", "kind": "side"},
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = ember("import", "--partial", str(source), url=db)
    assert out.returncode == 10, out.stderr
    assert f"{source}:3:" in out.stderr
    assert "imported 1 threads" in out.stdout
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM ember.threads WHERE id = 't1'").fetchone() == (1,)


def test_11_an_unknown_fact(db: str) -> None:
    one_line_failure(ember("explain", "987654", url=db), 11, "no such fact: 987654")


def test_12_the_server_died_while_the_command_ran(tmp_path: Path) -> None:
    """A backend killed with SIGKILL takes the whole server down with it (PostgreSQL restarts
    every session): the command says the server terminated and names its log."""
    server = EmbeddedServer(tmp_path)
    url = server.start()
    try:
        setup = subprocess.run(
            [sys.executable, "-m", "ember.cli", "migrate"],
            env={**os.environ, "EMBER_HOME": str(tmp_path), "DATABASE_URL": ""},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert setup.returncode == 0, setup.stderr
        with psycopg.connect(url, autocommit=True) as conn:
            # The command's own query waits, so there is a moment to pull the server away.
            conn.execute(
                "CREATE OR REPLACE FUNCTION ember.explain_fact(p_fact bigint) RETURNS jsonb"
                " LANGUAGE sql AS $$ SELECT to_jsonb(pg_sleep(60)::text) $$"
            )
        env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "ember.cli", "explain", "1"],
            env={**env, "EMBER_HOME": str(tmp_path)},
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        backend = None
        deadline = time.monotonic() + 30
        with psycopg.connect(url, autocommit=True) as conn:
            while backend is None and time.monotonic() < deadline:
                row = conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE query LIKE '%explain_fact%'"
                    " AND pid <> pg_backend_pid()"
                ).fetchone()
                backend = row[0] if row else None
                time.sleep(0.1)
        assert backend is not None, "the command's query never started"
        os.kill(backend, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 12, stderr
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in stderr, lines
        assert "terminated" in lines[0] and str(server.layout.log) in lines[0]
        assert "DATABASE_URL" not in lines[0]
    finally:
        server.stop()


def test_debug_is_accepted_before_and_after_every_subcommand() -> None:
    help_text = ember("--help").stdout
    commands = re.search(r"\{([a-z,-]+)\}", help_text)
    assert commands is not None
    for command in commands[1].split(","):
        if command == "sim":
            continue  # its own parser (docs/sim.md)
        for argv in (("--debug", command, "--help"), (command, "--debug", "--help")):
            out = ember(*argv)
            assert out.returncode == 0, (argv, out.stderr)
            assert f"usage: ember {command}" in out.stdout


def test_tables_to_a_pipe_are_never_truncated(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        comparedata.seed_case(conn)
    out = ember("compare", url=db)
    assert out.returncode == 0, out.stderr
    assert "…" not in out.stdout, "rich shortened a cell to fit 80 columns"
    assert "$" in out.stdout
    tsv = ember("compare", "--format", "tsv", url=db)
    assert tsv.returncode == 0, tsv.stderr
    rows = [line.split("\t") for line in tsv.stdout.splitlines() if line and line[0] != "#"]
    assert ["measure", "value"] in rows
    widths = {len(r) for r in rows}
    assert 2 in widths and 14 in widths, "each table keeps its own column count"
    assert "…" not in tsv.stdout
