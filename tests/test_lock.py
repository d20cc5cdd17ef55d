"""The locks in requirements/ agree with pyproject.toml, and the environment is what they say.

pyproject.toml holds ranges (for installing Ember as a library); requirements/PART.txt holds
what `make` installs (scripts/lock.py writes them, scripts/install.py installs them with
`--require-hashes --no-deps`). A package added to one and not the other, a pin outside its
range, a lock entry without a hash or a part that disagrees with all.txt fails here, one line
per disagreement.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ROOT / "requirements"
# part -> extras it adds to the base dependencies; base and all also hold the build requirements
PARTS: dict[str, tuple[str, ...]] = {
    "base": (),
    "test": ("test",),
    "lint": ("lint",),
    "embed": ("embed",),
    "all": ("test", "lint", "embed"),
}
WITH_BUILD = ("base", "all")
DIRECT = re.compile(r"^ember \(pyproject\.toml(::build-system\.requires)?\)$")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)(?:\s*\\)?$")
HASH = re.compile(r"^--hash=sha256:[0-9a-f]{64}(?:\s*\\)?$")


@dataclass
class Entry:
    version: str
    hashes: int = 0
    via: set[str] = field(default_factory=set)


def parse_lock(text: str) -> tuple[dict[str, Entry], list[str]]:
    """The entries of a pip-compile lock with hashes, and every line that is not one."""
    entries: dict[str, Entry] = {}
    strange: list[str] = []
    current: Entry | None = None
    in_via = False
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if not raw.startswith((" ", "#")):
            m = PIN.match(line)
            if not m:
                strange.append(f"line {number}: {line!r} is not name==version")
                current = None
                continue
            current = entries[canonicalize_name(m.group(1))] = Entry(m.group(2))
            in_via = False
        elif line.startswith("--hash="):
            if current is None or not HASH.match(line):
                strange.append(f"line {number}: {line!r} is not a sha256 hash of an entry")
            else:
                current.hashes += 1
        elif current is not None and line.startswith("# via"):
            said = line.removeprefix("# via").strip()
            in_via = not said
            if said:
                current.via.add(said)
        elif current is not None and in_via and line.startswith("#   "):
            current.via.add(line.removeprefix("#").strip())
        elif line.startswith("#"):
            in_via = False
    return entries, strange


def wanted(pyproject: dict, part: str) -> dict[str, Requirement]:
    """The direct requirements of one part, by canonical name."""
    project = pyproject["project"]
    specs = list(project["dependencies"])
    for extra in PARTS[part]:
        specs += project["optional-dependencies"][extra]
    if part in WITH_BUILD:
        specs += pyproject["build-system"]["requires"]
    found: dict[str, Requirement] = {}
    for spec in specs:
        req = Requirement(spec)
        if req.marker is None or req.marker.evaluate():
            found[canonicalize_name(req.name)] = req
    return found


def disagreements(pyproject: dict, part: str, entries: dict[str, Entry]) -> list[str]:
    """Every way one part's lock disagrees with pyproject.toml or is not a closed, hashed set."""
    said: list[str] = []
    direct = wanted(pyproject, part)
    locked_direct = {name for name, e in entries.items() if any(DIRECT.match(v) for v in e.via)}
    for name in sorted(direct.keys() - entries.keys()):
        said.append(f"{part}: {direct[name]} is in pyproject.toml and not in the lock")
    for name in sorted(direct.keys() & entries.keys() - locked_direct):
        said.append(
            f"{part}: {direct[name]} is in pyproject.toml; the lock has it only as another "
            "package's dependency (re-run make lock)"
        )
    for name in sorted(locked_direct - direct.keys()):
        said.append(f"{part}: {name} is locked as Ember's own requirement, not in pyproject.toml")
    for name in sorted(direct.keys() & entries.keys()):
        req, version = direct[name], entries[name].version
        if not req.specifier.contains(Version(version), prereleases=True):
            said.append(f"{part}: {name}=={version} is outside pyproject.toml's {req}")
    for name, entry in sorted(entries.items()):
        if entry.hashes == 0:
            said.append(f"{part}: {name}=={entry.version} has no hash")
        parents = {canonicalize_name(v) for v in entry.via if not v.startswith(("-c ", "ember "))}
        if name not in direct.keys() | locked_direct and not parents & entries.keys():
            said.append(f"{part}: {name} is required by nothing in the lock ({entry.via})")
    return said


def load(part: str) -> dict[str, Entry]:
    entries, strange = parse_lock((LOCKS / f"{part}.txt").read_text())
    assert strange == [], f"requirements/{part}.txt: " + "; ".join(strange)
    return entries


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


@pytest.mark.parametrize("part", sorted(PARTS))
def test_each_lock_agrees_with_pyproject(pyproject: dict, part: str) -> None:
    assert disagreements(pyproject, part, load(part)) == []


@pytest.mark.parametrize("part", sorted(set(PARTS) - {"all"}))
def test_each_part_pins_what_all_pins(part: str) -> None:
    everything, entries = load("all"), load(part)
    assert sorted(entries.keys() - everything.keys()) == []
    assert {n: e.version for n, e in entries.items() if everything[n].version != e.version} == {}


def test_a_package_in_one_and_not_the_other_is_named(pyproject: dict) -> None:
    entries = load("base")
    added = {**pyproject, "project": {**pyproject["project"]}}
    added["project"]["dependencies"] = [*pyproject["project"]["dependencies"], "left-pad>=1"]
    assert disagreements(added, "base", entries) == [
        "base: left-pad>=1 is in pyproject.toml and not in the lock"
    ]
    extra = {**entries, "left-pad": Entry("1.0", 1, {"ember (pyproject.toml)"})}
    assert disagreements(pyproject, "base", extra) == [
        "base: left-pad is locked as Ember's own requirement, not in pyproject.toml"
    ]
    narrowed = {**pyproject, "project": {**pyproject["project"]}}
    narrowed["project"]["dependencies"] = [
        "anthropic<1" if d.startswith("anthropic") else d
        for d in pyproject["project"]["dependencies"]
    ]
    assert [d for d in disagreements(narrowed, "base", entries) if "anthropic" in d] == [
        f"base: anthropic=={entries['anthropic'].version} is outside pyproject.toml's anthropic<1"
    ]
    unhashed = {**entries, "anthropic": Entry(entries["anthropic"].version, 0, {"x"})}
    assert any("no hash" in d for d in disagreements(pyproject, "base", unhashed))


def test_a_line_that_is_not_a_pin_is_named() -> None:
    _, strange = parse_lock("anthropic>=2 \\\n    --hash=sha256:00\n-e .\n")
    assert len(strange) == 3


def test_the_environment_is_what_the_locks_say() -> None:
    """The suite runs in what `make test` installed: every locked package at its pinned version."""
    expected = {**load("test"), **load("embed")}
    installed = {
        canonicalize_name(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()
    }
    differ = {
        name: (entry.version, installed.get(name))
        for name, entry in expected.items()
        if installed.get(name) != entry.version
    }
    if differ and (ROOT / ".ember" / "latest").resolve() in Path(sys.prefix).resolve().parents:
        pytest.skip("make test-latest runs the newest versions, not the locked ones")
    assert differ == {}
