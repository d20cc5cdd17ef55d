"""The version of a text: one rule shared by Python and SQL.

``text_version(text)`` is the hex sha256 of the text's UTF-8 bytes, as ``ember.text_version``
computes it in SQL for the identity documents. A run records it for the prompt text its requests
carried (the runs tables' ``prompt_sha256``), taken from the very string put in the request, so
it names what was sent; an analyst groups runs by it.
"""

from __future__ import annotations

import hashlib
from functools import cache


@cache
def text_version(text: str) -> str:
    """The hex sha256 of the text's UTF-8 bytes; computed once per distinct text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
