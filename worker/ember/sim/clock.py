"""The cache clock: injectable, so a test can say "6 minutes later" without sleeping."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime

# A clock returns epoch seconds or an aware datetime.
Clock = Callable[[], "float | int | datetime"]


def epoch_seconds(value: float | int | datetime) -> float:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("the simulator clock must return an aware datetime")
        return value.timestamp()
    return float(value)


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start: float | datetime = 1_800_000_000.0) -> None:
        self._now = epoch_seconds(start)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("time does not run backwards")
        with self._lock:
            self._now += seconds
            return self._now


def system_clock() -> float:
    return time.time()
