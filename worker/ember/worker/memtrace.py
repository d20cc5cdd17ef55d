"""A memory diagnostic for soaks, off unless asked for: `EMBER_MEMTRACE=<seconds>`.

Every interval the worker logs one `memtrace` line with its RSS. Two switches add to it:

- `EMBER_MEMTRACE_HEAP=1`: the Python heap as tracemalloc sees it (every object and every
  numpy buffer; not torch's own tensor memory), and the source lines whose allocations grew
  most since the previous line. RSS that grows while this heap stays flat is memory held below
  Python (the C allocator's arenas, torch), not objects Ember keeps; a heap that grows names
  the line that keeps them.
- `EMBER_MEMTRACE_TRIM=1`: glibc's malloc_trim(0) before the reading, which hands the free
  pages of every arena back to the kernel; the RSS before and after is what the allocator was
  holding free.

Tracing the heap costs time on every allocation and about as much memory again as the heap
(one frame per trace), so a run that measures RSS for itself leaves it off.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

log = logging.getLogger("ember.worker.memtrace")

TOP = 5


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def _trim() -> None:
    with contextlib.suppress(OSError, AttributeError):  # not glibc: the reading goes without
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def start_from_env() -> bool:
    """Start the diagnostic if EMBER_MEMTRACE names an interval; True if it started."""
    raw = os.environ.get("EMBER_MEMTRACE")
    if not raw:
        return False
    interval = float(raw)
    heap = os.environ.get("EMBER_MEMTRACE_HEAP") == "1"
    trim = os.environ.get("EMBER_MEMTRACE_TRIM") == "1"
    # The snapshots are themselves Python objects, allocated in tracemalloc.py: left out, so
    # the heap figure is the worker's and not the diagnostic's.
    mine = [tracemalloc.Filter(False, tracemalloc.__file__)]
    if heap:
        tracemalloc.start(1)

    def loop() -> None:
        previous = tracemalloc.take_snapshot().filter_traces(mine) if heap else None
        while True:  # a daemon thread: it ends with the process
            time.sleep(interval)
            line: dict[str, Any] = {"event": "memtrace", "rss_mb": _rss_mb()}
            if trim:
                _trim()
                line["rss_trimmed_mb"] = _rss_mb()
            if previous is not None:
                snapshot = tracemalloc.take_snapshot().filter_traces(mine)
                line["heap_mb"] = round(sum(t.size for t in snapshot.traces) / 2**20, 1)
                line["growth"] = [
                    [f"{s.traceback[0].filename}:{s.traceback[0].lineno}", s.size_diff]
                    for s in snapshot.compare_to(previous, "lineno")[:TOP]
                    if s.size_diff > 0
                ]
                previous = snapshot
            log.info("memtrace", extra=line)

    threading.Thread(target=loop, name="ember-memtrace", daemon=True).start()
    return True
