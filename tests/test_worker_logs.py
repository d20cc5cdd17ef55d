"""The worker's JSON log stays JSON lines whatever a library prints."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from ember.worker import logs


# Set up inside the test body: pytest puts its own sys.stdout and sys.stderr back between a
# fixture's setup and the test.
@contextmanager
def json_logging() -> Iterator[io.StringIO]:
    saved = (sys.stdout, sys.stderr, logging.getLogger("ember").handlers[:])
    stream = io.StringIO()
    try:
        logs.setup(level="info", fmt="json", secrets=["sk-secret-value"], stream=stream)
        yield stream
    finally:
        sys.stdout, sys.stderr = saved[0], saved[1]
        logging.getLogger("ember").handlers[:] = saved[2]


def test_what_a_library_prints_becomes_json_lines() -> None:
    with json_logging() as json_log:
        _print_like_libraries()
    lines = json_log.getvalue().splitlines()
    entries = [json.loads(line) for line in lines]  # every line is JSON
    assert [e["msg"] for e in entries] == [
        "Loading weights:   0%|          | 0/103 [00:00<?, ?it/s]",
        "Loading weights: 100%|##########| 103/103 [00:00<00:00]",
        "a notice on stdout quoting [redacted]",
        "claimed",
    ]
    assert [e["logger"] for e in entries[:3]] == ["ember.library"] * 3
    assert entries[0]["level"] == "warning" and entries[2]["level"] == "info"
    assert entries[3]["run"] == 7


def _print_like_libraries() -> None:
    # The embedder's weight loading draws a progress bar on stderr with carriage returns.
    sys.stderr.write("Loading weights:   0%|          | 0/103 [00:00<?, ?it/s]")
    sys.stderr.write("\rLoading weights: 100%|##########| 103/103 [00:00<00:00]\n")
    print("a notice on stdout quoting sk-secret-value")
    logging.getLogger("ember.worker").info("claimed", extra={"run": 7})
    sys.stdout.flush()


def test_the_text_log_leaves_the_streams_alone() -> None:
    saved = (sys.stdout, sys.stderr, logging.getLogger("ember").handlers[:])
    try:
        logs.setup(level="info", fmt="text", secrets=[], stream=io.StringIO())
        assert (sys.stdout, sys.stderr) == saved[:2]
    finally:
        sys.stdout, sys.stderr = saved[0], saved[1]
        logging.getLogger("ember").handlers[:] = saved[2]
