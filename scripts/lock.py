"""Write requirements/*.txt, the locks every install of Ember's environment reads.

    python3 scripts/lock.py                      every package to the newest version allowed
    python3 scripts/lock.py --upgrade NAME ...   only these move; every other pin is kept

pyproject.toml says what Ember accepts (ranges, for people who install it as a library);
the locks say what `make demo`, `make test` and CI install: exact versions with sha256 hashes,
the transitive packages included, resolved by pip-compile (pip-tools) with pip's own resolver
and the machine's pip configuration, so that a lock names what `pip install` itself would take.

requirements/all.txt is one resolution of every part together; each part's lock (base, test,
lint, embed: what scripts/install.py installs) is resolved again under all.txt as constraints,
so parts installed one after another into one environment always agree. base.txt also holds
what building Ember itself needs (setuptools), since installs run without build isolation.

pip-tools runs from its own environment, .ember/lock-tools, installed from
requirements/tools.txt with hashes. Standard library only.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ROOT / "requirements"
TOOLS = ROOT / ".ember" / "lock-tools"

# part -> (extras, also the build requirements)
PARTS: dict[str, tuple[tuple[str, ...], bool]] = {
    "base": ((), True),
    "test": (("test",), False),
    "lint": (("lint",), False),
    "embed": (("embed",), False),
}
ALL_EXTRAS = ("test", "lint", "embed")
COMMON = [
    "--quiet",
    "--generate-hashes",
    "--allow-unsafe",
    "--strip-extras",
    "--no-emit-index-url",
    "--no-emit-find-links",
]
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def pins(path: Path) -> dict[str, str]:
    """name -> version of every `name==version` line of a lock (empty if there is none yet)."""
    if not path.exists():
        return {}
    found = {}
    for line in path.read_text().splitlines():
        m = _PIN.match(line)
        if m:
            found[m.group(1).lower()] = m.group(2)
    return found


def tools_python() -> Path:
    python = TOOLS / "bin" / "python"
    stamp = TOOLS / ".installed"
    lock = LOCKS / "tools.txt"
    if not stamp.exists() or stamp.stat().st_mtime < lock.stat().st_mtime:
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(TOOLS)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--require-hashes", "-r", str(lock)],
            check=True,
        )
        stamp.touch()
    return python


def compile_lock(python: Path, output: Path, args: list[str]) -> None:
    command = [str(python), "-m", "piptools", "compile", *COMMON, *args]
    command += ["--output-file", str(output.relative_to(ROOT))]
    print(f"==> {output.relative_to(ROOT)}", flush=True)
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"pip-compile failed writing {output.relative_to(ROOT)} (see above)")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--upgrade", nargs="+", metavar="NAME", help="move only these packages; keep other pins"
    )
    args = parser.parse_args(argv)

    python = tools_python()
    before = pins(LOCKS / "all.txt")
    if args.upgrade:
        moving = [f"--upgrade-package={name}" for name in args.upgrade]
    else:
        moving = ["--upgrade"]
        # The tool itself moves forward with everything else.
        compile_lock(python, LOCKS / "tools.txt", ["requirements/tools.in"])
    extras = [f"--extra={e}" for e in ALL_EXTRAS]
    compile_lock(
        python, LOCKS / "all.txt", [*moving, *extras, "--build-deps-for=editable", "pyproject.toml"]
    )
    for part, (part_extras, build) in PARTS.items():
        compile_lock(
            python,
            LOCKS / f"{part}.txt",
            [
                "--upgrade",  # each part follows all.txt, whatever its previous pins were
                "--constraint=requirements/all.txt",
                *[f"--extra={e}" for e in part_extras],
                *(["--build-deps-for=editable"] if build else []),
                "pyproject.toml",
            ],
        )
    after = pins(LOCKS / "all.txt")
    moved = [
        f"  {name}: {before.get(name, '(new)')} -> {after.get(name, '(gone)')}"
        for name in sorted(before.keys() | after.keys())
        if before.get(name) != after.get(name)
    ]
    print(f"{len(after)} packages locked; {len(moved)} moved" + (":" if moved else ""))
    print("\n".join(moved))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
