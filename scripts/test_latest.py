"""`make test-latest`: the whole suite against the newest versions pyproject.toml allows.

A throwaway environment under .ember/latest/ gets the newest release of every package
(`pip install --upgrade --upgrade-strategy eager`, no lock), prints which packages differ from
the locks of those parts, then runs pgTAP and pytest with it, against an embedded server of its own
(EMBER_HOME=.ember/latest/home, so the server of the main environment is left alone). The locks
and .venv are not touched; everything under .ember/latest/ is removed at the end, whatever
happens. A breaking release upstream shows here before `make lock` adopts it.

Standard library only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LATEST = ROOT / ".ember" / "latest"
VENV = LATEST / "venv"
HOME = LATEST / "home"
PARTS = ("base", "test", "embed")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lock import pins  # noqa: E402


def moved_packages() -> list[str]:
    listed = subprocess.run(
        [str(VENV / "bin" / "python"), "-m", "pip", "list", "--format=json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    installed = {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(listed)}
    # The parts installed here; lint's packages are not (the suite does not run them).
    locked = {k: v for part in PARTS for k, v in pins(ROOT / "requirements" / f"{part}.txt").items()}
    installed.pop("ember", None)
    moved = []
    for name in sorted(installed.keys() | locked.keys()):
        have, pinned = installed.get(name), locked.get(name)
        if have == pinned or (pinned is None and name in ("pip", "setuptools", "wheel")):
            continue  # the venv's own installer is not part of the lock
        moved.append(f"  {name}: locked {pinned or '(not locked)'}, newest {have or '(none)'}")
    return moved


def main() -> int:
    started = time.monotonic()
    shutil.rmtree(LATEST, ignore_errors=True)
    HOME.mkdir(parents=True)
    # The demo reads its corpus from the project root: the throwaway root shows the real one.
    (HOME / "examples").symlink_to(ROOT / "examples")
    env = {**os.environ, "EMBER_HOME": str(HOME)}
    ember = str(VENV / "bin" / "ember")
    try:
        for part in PARTS:
            code = subprocess.run(
                [sys.executable, str(ROOT / "scripts" / "install.py"), str(VENV), part, "--unlocked"],
                cwd=ROOT,
            ).returncode
            if code:
                return code
            (VENV / f".installed-{part}").touch()
        moved = moved_packages()
        print(f"==> {len(moved)} packages differ from the locks" + (":" if moved else ""))
        print("\n".join(moved), flush=True)
        subprocess.run([ember, "setup-test-tools"], cwd=ROOT, env=env, check=True)
        code = subprocess.run(
            ["make", "--no-print-directory", f"VENV={VENV.relative_to(ROOT)}",
             "TEST_DB=ember_test_latest", "pgtap", "pytest"],
            cwd=ROOT,
            env=env,
        ).returncode  # fmt: skip
        verdict = "passed" if code == 0 else f"FAILED (exit {code})"
        print(f"==> test-latest {verdict} in {time.monotonic() - started:.0f} s", flush=True)
        if moved:
            print("\n".join(moved))
        return code
    finally:
        if Path(ember).exists():
            subprocess.run([ember, "db", "stop"], cwd=ROOT, env=env, capture_output=True)
        shutil.rmtree(LATEST, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
