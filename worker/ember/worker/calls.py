"""The model client: one AsyncAnthropic per worker, exact-bytes posting, usage and error texts.

Every pipeline calls models through here so that configuration (ANTHROPIC_API_KEY,
ANTHROPIC_BASE_URL), retries, usage accounting and the way errors are named for a failed run
are decided once.
"""

from __future__ import annotations

import json
import re
from typing import Any

import anthropic
import httpx2
from anthropic import AsyncAnthropic

from ember.modelaccess import ModelAccess, model_access

USAGE_KEYS = (
    "input_tokens",
    "cache_read_input_tokens",
    "cache_creation_5m_input_tokens",
    "cache_creation_1h_input_tokens",
    "output_tokens",
)


ERROR_MESSAGE_CHARS = 300


def make_client(
    access: ModelAccess | None = None, *, max_retries: int = 2, timeout: float = 600.0
) -> AsyncAnthropic:
    """The shared async client. The SDK's own retries (408/409/429/5xx) stay on."""
    access = access or model_access()
    return AsyncAnthropic(
        api_key=access.api_key,
        base_url=access.base_url,
        max_retries=max_retries,
        timeout=timeout,
    )


def empty_usage() -> dict[str, int]:
    return dict.fromkeys(USAGE_KEYS, 0)


def usage_of(response: dict[str, Any] | None) -> dict[str, int]:
    """The five usage counts of one raw Messages API response (missing ones count 0)."""
    usage = empty_usage()
    raw = (response or {}).get("usage") or {}
    if not isinstance(raw, dict):
        return usage
    usage["input_tokens"] = _count(raw.get("input_tokens"))
    usage["cache_read_input_tokens"] = _count(raw.get("cache_read_input_tokens"))
    usage["output_tokens"] = _count(raw.get("output_tokens"))
    creation = raw.get("cache_creation")
    if isinstance(creation, dict):
        usage["cache_creation_5m_input_tokens"] = _count(creation.get("ephemeral_5m_input_tokens"))
        usage["cache_creation_1h_input_tokens"] = _count(creation.get("ephemeral_1h_input_tokens"))
    else:
        # An endpoint that reports only the total wrote with the default (5-minute) TTL.
        usage["cache_creation_5m_input_tokens"] = _count(raw.get("cache_creation_input_tokens"))
    return usage


def add_usage(total: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    return {k: total.get(k, 0) + more.get(k, 0) for k in USAGE_KEYS}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


async def post_message(
    client: AsyncAnthropic, body: bytes, *, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """POST these exact bytes to /v1/messages and return the raw response JSON.

    The SDK's own `messages.create` re-serializes its arguments; a replayed prefix must reach
    the API byte for byte, so the body goes through the client's transport untouched, with the
    client's authentication, retries and timeouts.
    """
    response = await client.post(
        "/v1/messages",
        content=body,
        cast_to=object,
        options={"headers": {"content-type": "application/json", **(headers or {})}},
    )
    if not isinstance(response, dict):
        raise CallError("the endpoint answered with something other than a JSON object")
    clean: dict[str, Any] = without_nul(response)
    return clean


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def without_nul(value: Any) -> Any:
    """`value` with every U+0000 and every lone surrogate in its strings and keys replaced by
    U+FFFD.

    JSON may carry \\u0000 or a lone \\ud800 and a model may write one (the text it reads can
    ask it to), but PostgreSQL's text and jsonb cannot hold either: left in, one character of a
    model's answer would turn the submit into a raw database error and the run into a lapsed
    lease. Replacing them where the answer enters the worker keeps whatever the model said
    storable, and visibly altered. (A surrogate pair in JSON is decoded into one character, so a
    surrogate left in a Python string is always a lone one.)
    """
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_nul(v) for v in value]
    return value


async def create_message(client: AsyncAnthropic, request: dict[str, Any]) -> dict[str, Any]:
    """Send a request built here (not a replay) and return the raw response JSON."""
    body = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode()
    return await post_message(client, body)


class CallError(Exception):
    """A model call that produced no usable answer; its text becomes the failed run's error."""


def describe_error(exc: BaseException) -> str:
    """A short, secret-free description of a failed call for the run's error column."""
    if isinstance(exc, anthropic.APIStatusError):
        kind = ""
        said = ""
        body = exc.body
        if isinstance(body, dict):
            err = body.get("error")
            if isinstance(err, dict):
                kind = str(err.get("type") or "")
                if exc.status_code == 400:
                    # A refused request says why (e.g. a thinking block bound to another
                    # prefix): the API's own words, cut short, so the failed run names it.
                    said = " ".join(str(err.get("message") or "").split())[:ERROR_MESSAGE_CHARS]
        return f"http {exc.status_code}{' ' + kind if kind else ''}{': ' + said if said else ''}"
    # A transport failure is one failure however the SDK spells it: wrapped in its own
    # APIConnectionError / APITimeoutError, or (reading a body cut short mid-stream, in some
    # releases) the HTTP library's error left as it was raised.
    if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
        return "timeout"
    if isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError):
        return "connection error"
    if isinstance(exc, CallError):
        return str(exc)
    return type(exc).__name__
