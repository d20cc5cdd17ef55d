"""`ember models list` and `ember models load FILE`: the model registry (docs/models.md)."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    models = sub.add_parser(
        "models", parents=[common], help="the model registry: list it, or load a file of models"
    )
    models.add_argument("action", choices=["list", "load"])
    models.add_argument("file", nargs="?", help="with load: the registry file (docs/models.md)")
    models.add_argument("--json", action="store_true", help="with list: the rows as JSON")
    models.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ember.commands.base import migrated_url
    from ember.models_cli import run as run_models

    return run_models(args, migrated_url())
