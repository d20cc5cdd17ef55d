"""`ember status`: ember.work_status() on the terminal, one line per pipeline, state and reason."""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any

UNITS = {
    "shadow": "thread",
    "steward": "generation",
    "cutover": "row",
    "workers": "connection",
}


def _when(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone().isoformat(timespec="seconds")


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    status = sub.add_parser(
        "status",
        parents=[common],
        help="what is ready, what waits and why, and which workers are about",
    )
    status.add_argument("--json", action="store_true", help="ember.work_status() as JSON")
    status.set_defaults(run=run)


def rows() -> list[dict[str, Any]]:
    from ember import queries
    from ember.commands._db import connect

    with connect() as conn:
        cur = conn.execute(queries.WORK_STATUS)
        names = [c.name for c in cur.description or []]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def line(row: dict[str, Any]) -> str:
    """`pipeline  state  reason  N unit(s) (oldest X, since T, until U): detail`."""
    unit = UNITS.get(row["pipeline"], "item")
    count = f"{row['items']} {unit}{'' if row['items'] == 1 else 's'}"
    where = ", ".join(
        part
        for part in (
            f"{'worker' if row['pipeline'] == 'workers' else 'oldest'} {row['oldest']}"
            if row["oldest"]
            else None,
            f"since {_when(row['since'])}" if row["since"] else None,
            f"until {_when(row['until'])}" if row["until"] else None,
        )
        if part
    )
    head = f"{row['pipeline']:<8} {row['state']:<9} {row['reason']:<23} {count}"
    return f"{head}{f' ({where})' if where else ''}: {row['detail']}"


def run(args: argparse.Namespace) -> int:
    found = rows()
    if args.json:
        print(json.dumps(found, default=str, indent=2))
        return 0
    for row in found:
        print(line(row))
    waiting = [r for r in found if r["state"] == "waiting"]
    ready = [r for r in found if r["state"] in ("ready", "running")]
    if not ready and not waiting:
        print("no work: nothing is ready, running or waiting")
    return 0
