"""Structured logs: one JSON object a line, or plain text on a terminal; never a secret.

Secrets are kept out twice: nothing logs a key on purpose, and a filter masks every configured
secret value in the final text, so a key quoted in some library's error message is masked too.
"""

from __future__ import annotations

import json
import logging
import sys
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
    return root
