"""A fault hook for the reliability tests, off unless EMBER_FAULT_PAUSE is set.

`EMBER_FAULT_PAUSE=<pipeline>:<step>` makes the process stop at one boundary of one pipeline's
work and wait there for good, so that a test can kill it with SIGKILL exactly there
(tests/test_reliability_steps.py). Two boundaries cannot be reached from outside without it:

- `before-call`: the run is claimed (the lease is held and renewed), no model call has started;
- `before-submit`: the model's answer is in hand, nothing of it has been written.

The pipelines are `shadow`, `steward`, `consolidation` and `judge` (`ember compare
--semantic`, whose "claim" is reading the window's groups). The other two boundaries need no
hook: a test holds the call with a hanging simulator, and the submit with a lock.

A third part, `<pipeline>:<step>:<n>`, waits at the n-th time the process reaches the boundary
instead of the first (the steward reaches `before-submit` once a round). Only the named boundary
of the named pipeline waits; it logs `fault_pause` first, so the test waits on that line rather
than on time. Never set it outside a test: the process stops working.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time

ENV = "EMBER_FAULT_PAUSE"

log = logging.getLogger("ember.faults")
_reached: dict[str, int] = {}


def _armed(pipeline: str, step: str) -> bool:
    wanted = os.environ.get(ENV)
    if not wanted:
        return False
    named, _, rest = wanted.partition(":")
    at, _, nth = rest.partition(":")
    if (named, at) != (pipeline, step):
        return False
    key = f"{pipeline}:{step}"
    _reached[key] = _reached.get(key, 0) + 1
    return _reached[key] == (int(nth) if nth.isdigit() else 1)


async def pause(pipeline: str, step: str) -> None:
    """Wait for good at this boundary if EMBER_FAULT_PAUSE names it; else return at once.

    Only this coroutine waits: the rest of the worker (lease renewals, tick, claims) goes on, as
    it would while a slow step ran."""
    if not _armed(pipeline, step):
        return
    log.warning(
        "fault pause at %s:%s (%s)",
        pipeline,
        step,
        ENV,
        extra={"event": "fault_pause", "pipeline": pipeline, "step": step},
    )
    await asyncio.Event().wait()


def pause_blocking(pipeline: str, step: str) -> None:
    """pause() for synchronous code (the semantic judge); the line goes to stderr."""
    if not _armed(pipeline, step):
        return
    print(f"ember: fault pause at {pipeline}:{step} ({ENV})", file=sys.stderr, flush=True)
    while True:
        time.sleep(3600)
