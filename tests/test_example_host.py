"""examples/host.py end to end: a hot shadow turn read from cache, a cancelled one, proposals."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import ROOT


def test_the_host_example_runs(server_url: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "host.py")],
        env={**os.environ, "DATABASE_URL": server_url, "ANTHROPIC_API_KEY": "example-key"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    hot = re.search(r"trip: hot completed, cache read (\d+) tokens", out)
    assert hot and int(hot.group(1)) > 1000, out
    assert "ops: hot cancelled (interrupted-by-user)" in out
    assert re.search(r"trip: .*window seats.*\[user-stated", out), out
