"""The model client for the semantic judge, built from the environment like the worker's.

`ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL` point it at Anthropic or any compatible endpoint
(`ember sim` offline). Kept to one small function so it can give way to the worker's shared
client (ember.worker.calls) without touching the judge.
"""

from __future__ import annotations

import anthropic

from ember.modelaccess import ModelAccess, model_access


def judge_client(access: ModelAccess | None = None) -> anthropic.Anthropic:
    access = access or model_access()
    return anthropic.Anthropic(api_key=access.api_key, base_url=access.base_url, max_retries=2)
