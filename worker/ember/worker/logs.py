"""Structured logs: one JSON object a line, or plain text on a terminal; never a secret.

Secrets are kept out twice: nothing logs a key on purpose, and a filter masks every configured
secret value in the final text, so a key quoted in some library's error message is masked too.

In JSON mode the log is JSON lines whatever a library prints: sys.stdout and sys.stderr are
replaced by streams that turn each line written to them into a record of logger
`ember.library` (a progress bar's carriage-return updates become a line each), while the log's
own handler keeps the real stderr.
"""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
from datetime import UTC, datetime
from typing import Any, TextIO

_STANDARD = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime", "taskName"}


class _Masking(logging.Formatter):
    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self._secrets = [s for s in secrets if s and len(s) >= 4]

    def mask(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        return text


class JsonFormatter(_Masking):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info and record.exc_info[1] is not None:
            entry["exc"] = f"{type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
        return self.mask(json.dumps(entry, default=str, ensure_ascii=False))


class TextFormatter(_Masking):
    def format(self, record: logging.LogRecord) -> str:
        extras = {
            k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")
        }
        tail = " ".join(f"{k}={v}" for k, v in extras.items())
        line = f"{record.levelname.lower():7} {record.getMessage()}" + (f"  {tail}" if tail else "")
        if record.exc_info and record.exc_info[1] is not None:
            line += f"  ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
        return self.mask(line)


class LibraryOutput(io.TextIOBase):
    """A text stream whose lines become log records: what a library prints (a progress bar, a
    notice on stdout) joins the structured log instead of breaking its lines."""

    def __init__(self, logger: logging.Logger, level: int) -> None:
        super().__init__()
        self._logger = logger
        self._level = level
        self._pending = ""
        self._lock = threading.Lock()
        self._local = threading.local()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += text
            *lines, self._pending = self._pending.replace("\r", "\n").split("\n")
        for line in lines:
            self._emit(line)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            line, self._pending = self._pending, ""
        self._emit(line)

    def _emit(self, line: str) -> None:
        # A record that fails to format would be reported on sys.stderr, which is this stream:
        # such a report is dropped rather than looped.
        if not line.strip() or getattr(self._local, "busy", False):
            return
        self._local.busy = True
        try:
            self._logger.log(self._level, line.rstrip())
        finally:
            self._local.busy = False


def setup(
    *, level: str = "info", fmt: str = "auto", secrets: list[str], stream: TextIO | None = None
) -> logging.Logger:
    stream = stream or sys.stderr
    if fmt == "auto":
        fmt = "text" if stream.isatty() else "json"
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(secrets) if fmt == "json" else TextFormatter(secrets))
    root = logging.getLogger("ember")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    # Libraries that may log request details at debug level stay at warning.
    for name in ("httpx", "httpx2", "anthropic", "psycopg"):
        logging.getLogger(name).setLevel(logging.WARNING)
    if fmt == "json":
        library = logging.getLogger("ember.library")
        sys.stdout = LibraryOutput(library, logging.INFO)
        sys.stderr = LibraryOutput(library, logging.WARNING)
    return root
