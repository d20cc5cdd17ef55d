"""The operator's commands beyond the core: `ember init`, `status`, `settings`, `forget`, `search`.

Each is a thin client of one SQL function (functions/090_setup.sql, 095_work_status.sql,
001_settings.sql, 087_forget.sql, 053_steward_search.sql). This module only declares their
arguments; each command's module is imported when the command runs, so `ember --help` and every
other command start without loading them.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any


def _lazy(module: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        return int(importlib.import_module(f"ember.commands.{module}").run(args))

    return run


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the commands to `ember`'s subparsers."""
    init = sub.add_parser(
        "init",
        parents=[common],
        help="the one-time set-up: categories, main, the steward's thread, shadow (idempotent)",
    )
    init.add_argument(
        "--category",
        action="append",
        default=[],
        metavar="NAME[=DESCRIPTION]",
        help="a content category to define (repeatable)",
    )
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
    init.set_defaults(func=_lazy("init"))

    status = sub.add_parser(
        "status",
        parents=[common],
        help="what is ready, what waits and why, and which workers are about",
    )
    status.add_argument("--json", action="store_true", help="ember.work_status() as JSON")
    status.set_defaults(func=_lazy("status"))

    settings = sub.add_parser(
        "settings",
        parents=[common],
        help="list the settings, show one, or change one (ember settings KEY VALUE)",
    )
    settings.add_argument("key", nargs="?", help="the setting to show or change")
    settings.add_argument("value", nargs="?", help="its new value, e.g. '5 minutes' or 3")
    settings.set_defaults(func=_lazy("settings"))

    forget = sub.add_parser(
        "forget",
        parents=[common],
        help="erase a thread or messages, and everything derived from them (docs/forgetting.md)",
    )
    what = forget.add_mutually_exclusive_group(required=True)
    what.add_argument("--thread", metavar="THREAD", help="every row of this thread")
    what.add_argument("--messages", metavar="ID[,ID...]", help="these message ids")
    forget.add_argument("--reason", required=True, help="why (kept in the history)")
    forget.add_argument(
        "--dry-run", action="store_true", help="print what would go, and change nothing"
    )
    forget.add_argument("--json", action="store_true", help="print the SQL function's answer")
    forget.set_defaults(func=_lazy("forget"))

    search = sub.add_parser(
        "search", parents=[common], help="search the facts a viewer may read (search_memory)"
    )
    search.add_argument("query", help="what to look for")
    search.add_argument(
        "--viewer",
        required=True,
        metavar="THREAD",
        help="the thread whose model's labels decide what may be read, or 'human'",
    )
    search.add_argument("--limit", type=int, default=10, help="at most this many facts (1-100)")
    search.add_argument(
        "--embed", action="store_true", help="also search by meaning, with the worker's embedder"
    )
    search.add_argument("--json", action="store_true", help="the facts as JSON")
    search.set_defaults(func=_lazy("search"))
