"""`ember init`: the one-time set-up for operators, through ember.setup() (Host.setup for hosts)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ember.commands.base import EXIT_USAGE, CliError, add_tenant_argument


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    init = sub.add_parser(
        "init",
        parents=[common],
        help="the one-time set-up: tenant, categories, main, the steward's thread, shadow"
        " (idempotent)",
    )
    init.add_argument(
        "--category",
        action="append",
        default=[],
        metavar="NAME[=DESCRIPTION]",
        help="a content category to define (repeatable)",
    )
    add_tenant_argument(init, "the person whose main and steward these are, created if new")
    init.add_argument("--main", metavar="THREAD", help="create main with this id (if none exists)")
    init.add_argument("--main-model", metavar="MODEL", help="the model main is pinned to")
    init.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="MODEL=CATEGORY",
        help="tag a model for a category, so it may read that category (repeatable)",
    )
    init.add_argument("--no-shadow", action="store_true", help="leave shadow memory switched off")
    init.set_defaults(run=run)


def _pairs(values: list[str], what: str, *, required: bool) -> list[tuple[str, str | None]]:
    pairs: list[tuple[str, str | None]] = []
    for value in values:
        name, sep, rest = value.partition("=")
        if not name.strip() or (required and not (sep and rest.strip())):
            shape = "MODEL=CATEGORY" if required else "NAME[=DESCRIPTION]"
            raise CliError(EXIT_USAGE, f"{what} {value!r}: expected {shape}")
        pairs.append((name.strip(), rest.strip() if sep else None))
    return pairs


def run(args: argparse.Namespace) -> int:
    from ember import queries
    from ember.commands._db import connect

    categories = dict(_pairs(args.category, "--category", required=False))
    tags = _pairs(args.tag, "--tag", required=True)
    with connect() as conn, conn.transaction():
        rows = conn.execute(
            queries.HOST_SETUP,
            {
                "tenant": args.tenant,
                "categories": json.dumps(categories),
                "main": args.main,
                "main_model": args.main_model,
                "activate_shadow": not args.no_shadow,
                "now": None,
            },
        ).fetchall()
        for _step, changed, detail in rows:
            print(f"{'done' if changed else 'ok  '}  {detail}")
        for model, category in tags:
            row = conn.execute(queries.TAG_MODEL, {"model": model, "category": category}).fetchone()
            added = bool(row and row[0])
            print(
                f"{'done' if added else 'ok  '}  model {model} "
                f"{'tagged' if added else 'already tagged'} for {category}"
            )
    return 0
