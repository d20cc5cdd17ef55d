"""`ember` starts at once: building the parser imports no command's machinery, and each command
imports only what it uses (ember.commands says how). Import lists, not timings: timings belong
to benchmarks on a shared machine."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from test_cli import ROOT

HEAVY = ("anthropic", "psycopg", "pydantic", "rich", "httpx", "starlette", "uvicorn", "torch")

_PROBE = """
import json, sys
from ember.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr)
"""


def _imported(*argv: str, env: dict[str, str] | None = None) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, cwd=ROOT, env=env
    )
    return set(json.loads(out.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "argv",
    [
        ("--help",),
        ("worker", "--help"),
        ("demo", "--help"),
        ("compare", "--help"),
        ("mcp", "--help"),
    ],
)
def test_help_imports_nothing_heavy(argv: tuple[str, ...]) -> None:
    assert _imported(*argv) & set(HEAVY) == set()


def test_db_url_and_migrate_status_skip_the_sdk_and_the_worker(server_url: str) -> None:
    import os

    env = {**os.environ, "DATABASE_URL": server_url}
    for argv in (("db", "url"), ("migrate", "--status")):
        heavy = _imported(*argv, env=env) & set(HEAVY)
        assert heavy <= {"psycopg"}, (argv, heavy)
