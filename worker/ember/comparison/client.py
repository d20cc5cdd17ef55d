"""The model client for the semantic judge, built from the environment like the worker's.

`ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL` point it at Anthropic or any compatible endpoint
(`ember sim` offline). Kept to one small function so it can give way to the worker's shared
client (ember.worker.calls) without touching the judge.
"""

from __future__ import annotations

import os

import anthropic


def judge_client() -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key=os.environ.get("ANTHROPIC_API_KEY"),
        base_url=os.environ.get("ANTHROPIC_BASE_URL") or None,
        max_retries=2,
    )
