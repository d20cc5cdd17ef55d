"""Every pgTAP file is named after the functions file whose rules it tests.

`pgtap/NNN_<stem>.sql`, or `pgtap/NNN_<stem>_<aspect>.sql` when one functions file has several
tests, tests `functions/NNN_<stem>.sql`: a reader of a rule finds its tests by the rule's file
name, and a test that names a number or a stem no functions file has (a file renumbered or
renamed under it) fails here. No database: this reads file names only.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"(?P<number>[0-9]{3})_[a-z0-9_]+")


def misnamed(pgtap: list[str], functions: list[str]) -> list[str]:
    """Why each pgTAP stem in `pgtap` names no stem in `functions`, one line per stem."""
    by_number: dict[str, list[str]] = {}
    for stem in functions:
        by_number.setdefault(stem[:3], []).append(stem)
    problems = []
    for stem in pgtap:
        match = NAME.fullmatch(stem)
        if match is None:
            problems.append(f"pgtap/{stem}.sql: not NNN_<name>.sql")
            continue
        candidates = by_number.get(match["number"], [])
        if not candidates:
            problems.append(f"pgtap/{stem}.sql: no functions/{match['number']}_*.sql")
        elif not any(stem == f or stem.startswith(f + "_") for f in candidates):
            names = ", ".join(f"{f}.sql" for f in sorted(candidates))
            problems.append(
                f"pgtap/{stem}.sql: functions/ has {names}; name it after one of them "
                "(NNN_<stem>.sql or NNN_<stem>_<aspect>.sql)"
            )
    return problems


def test_every_pgtap_file_names_a_functions_file() -> None:
    pgtap = sorted(p.stem for p in (ROOT / "pgtap").glob("*.sql"))
    functions = sorted(p.stem for p in (ROOT / "functions").glob("*.sql"))
    assert pgtap, "no pgTAP files found"
    problems = misnamed(pgtap, functions)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("stem", "reason"),
    [
        ("002_settings_setup", "no functions/002_*.sql"),
        ("052_steward_search", "functions/ has 052_steward_tools.sql"),
        ("049_model", "functions/ has 049_model_registry.sql, 049_shadow_hot_cache.sql"),
        ("015_hostile", "functions/ has 015_host.sql"),
        ("host_api", "not NNN_<name>.sql"),
    ],
)
def test_a_misnamed_file_is_named_with_its_reason(stem: str, reason: str) -> None:
    functions = ["015_host", "049_model_registry", "049_shadow_hot_cache", "052_steward_tools"]
    (problem,) = misnamed([stem], functions)
    assert reason in problem


@pytest.mark.parametrize("stem", ["015_host", "015_host_prefix_bytes", "049_shadow_hot_cache_x"])
def test_a_file_named_after_its_functions_file_passes(stem: str) -> None:
    assert misnamed([stem], ["015_host", "049_model_registry", "049_shadow_hot_cache"]) == []
