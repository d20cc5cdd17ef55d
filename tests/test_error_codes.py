"""Every EM SQLSTATE the SQL raises is listed, once, in docs/errors.md."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = re.compile(r"\bEM\d{3}\b")


def _raised() -> set[str]:
    found: set[str] = set()
    for path in sorted((ROOT / "functions").glob("*.sql")):
        found |= set(CODE.findall(path.read_text()))
    return found


def _documented() -> list[str]:
    row = re.compile(r"^\|\s*(EM\d{3})\s*\|")
    lines = (ROOT / "docs" / "errors.md").read_text().splitlines()
    return [m.group(1) for line in lines if (m := row.match(line))]


def test_every_raised_code_is_documented() -> None:
    missing = _raised() - set(_documented())
    assert not missing, f"codes raised in functions/ but missing from docs/errors.md: {missing}"


def test_each_code_is_documented_once() -> None:
    documented = _documented()
    dupes = {c for c in documented if documented.count(c) > 1}
    assert not dupes, f"documented more than once: {dupes}"
