"""`ember settings [KEY [VALUE]]`: list, show or change a setting (ember.set_setting validates)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ember.commands.base import EXIT_USAGE, CliError


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    settings = sub.add_parser(
        "settings",
        parents=[common],
        help="list the settings, show one, or change one (ember settings KEY VALUE)",
    )
    settings.add_argument("key", nargs="?", help="the setting to show or change")
    settings.add_argument("value", nargs="?", help="its new value, e.g. '5 minutes' or 3")
    settings.set_defaults(run=run)


def _shown(value: Any) -> str:
    return str(value) if isinstance(value, str) else json.dumps(value)


def _range(row: dict[str, Any]) -> str:
    bounds = " to ".join(b for b in (row["min_value"], row["max_value"]) if b is not None)
    return f"{row['value_type'] or 'any'}{f', {bounds}' if bounds else ''}"


def run(args: argparse.Namespace) -> int:
    from ember import queries
    from ember.commands._db import connect

    with connect() as conn:
        if args.key is not None and args.value is not None:
            row = conn.execute(
                queries.SET_SETTING, {"key": args.key, "value": args.value}
            ).fetchone()
            change: dict[str, Any] = row[0] if row else {}
            print(
                f"{change['key']}: {_shown(change['previous'])} -> {_shown(change['value'])}"
                f" (default {_shown(change['default'])})"
            )
            return 0
        cur = conn.execute(queries.SETTINGS_LIST)
        names = [c.name for c in cur.description or []]
        found = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    if args.key is not None:
        found = [r for r in found if r["key"] == args.key]
        if not found:
            raise CliError(EXIT_USAGE, f"unknown setting {args.key!r}; `ember settings` lists them")
        row = found[0]
        for label, value in (
            ("value", _shown(row["value"])),
            ("default", _shown(row["default_value"])),
            ("type", _range(row)),
            ("meaning", row["description"]),
        ):
            print(f"{label:8} {value}")
        return 0
    width = max(len(r["key"]) for r in found)
    for row in found:
        changed = row["value"] != row["default_value"]
        default = f" (default {_shown(row['default_value'])})" if changed else ""
        value = _shown(row["value"]) + default
        print(f"{row['key']:<{width}}  {value:<24}  {row['description']}")
    return 0
