"""Every SQLSTATE Python names (ember.sqlstates) is the one docs/errors.md gives that name, and no
module compares `sqlstate` with a literal code."""

from __future__ import annotations

import re
from pathlib import Path

from ember import sqlstates

ROOT = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\| (EM[0-9A-Z]{3}) \| ([a-z_0-9]+) \|", re.MULTILINE)


def documented() -> dict[str, str]:
    return {name: code for code, name in ROW.findall((ROOT / "docs" / "errors.md").read_text())}


def test_each_named_code_is_the_documented_one() -> None:
    doc = documented()
    named = {k: v for k, v in vars(sqlstates).items() if k.isupper() and isinstance(v, str)}
    assert named, "ember.sqlstates names no code"
    wrong = {k: v for k, v in named.items() if doc.get(k.lower()) != v}
    assert wrong == {}, f"not as docs/errors.md names them: {wrong}"


def test_no_module_compares_a_sqlstate_with_a_literal() -> None:
    literal = re.compile(r"""sqlstate\s*(?:[!=]=|(?:not\s+)?in)\s*[("']*EM\d""")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "worker" / "ember").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if literal.search(line)
    ]
    assert found == []
