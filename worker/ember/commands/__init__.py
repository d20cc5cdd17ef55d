"""The `ember` commands, one module per command group.

Each module defines `register(sub, common)`, which adds its subparsers and sets `run` (a
function taking the parsed arguments and returning the exit code) on each. A module imports at
its top only what building its parser needs: `ember --help` builds every parser, so anything
heavier (psycopg, the SDK, the worker) is imported inside the function that runs the command.
`tests/test_cli_startup.py` holds every command to that.
"""

from __future__ import annotations

# In the order `ember --help` lists them.
MODULES = (
    "db",
    "migrate",
    "worker",
    "compare",
    "eval",
    "transfer",
    "explain",
    "init",
    "status",
    "settings",
    "forget",
    "cutover",
    "review",
    "search",
    "mcp",
    "models",
    "demo",
    "devtools",
)
