"""`ember db start|stop|status|url`: the embedded development database."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ember.commands.base import EXIT_NOT_RUNNING


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    db = sub.add_parser("db", parents=[common], help="the embedded development database")
    db.add_argument("action", choices=["start", "stop", "status", "url"])
    db.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ember.commands.base import checked_url
    from ember.config import uses_embedded
    from ember.embedded import EmbeddedServer, NotRunningError

    if args.action == "url" and not uses_embedded():
        # The URL alone, for scripts: `DATABASE_URL` wins, as everywhere else.
        print(checked_url())
        return 0
    server = EmbeddedServer()
    if args.action == "start":
        url = server.start()
        print(f"embedded PostgreSQL running: {url}")
    elif args.action == "stop":
        print("stopped" if server.stop() else "not running")
    elif args.action == "status":
        report = server.status()
        print(json.dumps(report, indent=2))
        return 0 if report["running"] else EXIT_NOT_RUNNING
    elif args.action == "url":
        # The embedded server's URL only while it runs: a URL nothing answers is worse than an
        # error.
        if server.running_pid() is None:
            raise NotRunningError(server.not_running_message())
        print(server.url())
    return 0
