"""`ember mcp`: serve Ember's memory to MCP clients as one fixed viewer (docs/mcp.md)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ember.tenants import DEFAULT_TENANT


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "mcp",
        parents=[common],
        help="serve memory to MCP clients, as one viewer (see docs/mcp.md)",
        description="Serve Ember's memory to MCP clients over stdio (or streamable HTTP on "
        "loopback), reading as one fixed viewer whose labels apply.",
    )
    p.add_argument(
        "--viewer",
        default=os.environ.get("EMBER_MCP_VIEWER"),
        help="whose labels apply: a thread id, or 'human' for the person (env EMBER_MCP_VIEWER);"
        " never the memory steward",
    )
    p.add_argument(
        "--tenant",
        default=os.environ.get("EMBER_MCP_TENANT", DEFAULT_TENANT),
        help="whose memory: the tenant the viewer belongs to (env EMBER_MCP_TENANT; default"
        " default)",
    )
    p.add_argument(
        "--database-url",
        default=None,
        help="PostgreSQL connection string (default: $DATABASE_URL, else the embedded server)",
    )
    p.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="with --http: a loopback address")
    p.add_argument("--port", type=int, default=8931, help="with --http (default 8931)")
    p.add_argument("--allow-forget", action="store_true", help="offer the forget tool")
    p.add_argument(
        "--embed", action="store_true", help="embed queries (EMBER_EMBEDDER) for the vector side"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ember.commands.base import EXIT_USAGE, CliError, migrated_url

    if not args.viewer:
        raise CliError(EXIT_USAGE, "--viewer is required: a thread id, or 'human'")
    from ember.mcp_server import is_loopback, serve
    from ember.memory import viewer_problem

    # The form is checked before any connection; whether the thread exists is asked at start
    # (exit 9, EM029), so a misconfigured client fails at once, never at its first call.
    problem = viewer_problem(args.viewer)
    if problem is not None:
        raise CliError(EXIT_USAGE, f"--viewer {problem}")

    if args.http and not is_loopback(args.host):
        raise CliError(EXIT_USAGE, f"--host {args.host} is not a loopback address")
    if args.database_url:
        from ember.migrate import check_schema_current

        url = args.database_url
        difference = check_schema_current(url)
        if difference is not None:
            from ember.commands.base import EXIT_MIGRATIONS

            raise CliError(EXIT_MIGRATIONS, difference)
    else:
        url = migrated_url()
    return serve(args, url)
