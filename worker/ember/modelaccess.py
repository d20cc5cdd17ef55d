"""Which model endpoint and key a command uses: ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL.

Kept apart from the client (ember.worker.calls) so that a command can check its configuration,
and fail with the variable's name, without importing the SDK.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


class ConfigError(Exception):
    """A command cannot start with this configuration (exit code 2)."""


@dataclass(frozen=True)
class ModelAccess:
    api_key: str
    base_url: str | None


def model_access(environ: dict[str, str] | None = None) -> ModelAccess:
    """The key and endpoint from ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL.

    A key is required when talking to Anthropic itself; a compatible endpoint (the simulator)
    accepts any value, so with a base URL and no key a fixed placeholder key is sent.
    """
    env = os.environ if environ is None else environ
    key = env.get("ANTHROPIC_API_KEY") or ""
    base = env.get("ANTHROPIC_BASE_URL") or None
    if not key and base is None:
        raise ConfigError(
            "no ANTHROPIC_API_KEY is set and no ANTHROPIC_BASE_URL: set a key for Anthropic, "
            "or point ANTHROPIC_BASE_URL at a compatible endpoint such as `ember sim`"
        )
    return ModelAccess(api_key=key or "unset", base_url=base)
