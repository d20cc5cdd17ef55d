"""The worker's settings and their defaults, in one place.

`ember worker`'s flags (ember.commands.worker) take their defaults and the "(default ...)" of
their help from this dataclass, so this module stays light: `ember worker --help` imports it
without the SDK, psycopg or the pipelines.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from ember.modelaccess import ConfigError


@dataclass
class WorkerConfig:
    database_url: str
    name: str
    pipelines: list[str]
    concurrency: int = 4
    lease: timedelta = timedelta(minutes=5)
    poll_interval: float = 10.0
    tick_interval: float | None = None  # None: the tick_interval setting in SQL
    grace: float = 30.0
    claimers: int = 2
    listen_timeout: float = 30.0
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    idle_report_after: float = 60.0  # seconds without a claim before saying why (idle.py)

    def check(self) -> None:
        if self.concurrency < 1:
            raise ConfigError(f"--concurrency must be at least 1, got {self.concurrency}")
        if self.lease <= timedelta(0):
            raise ConfigError("--lease must be positive")
        if self.poll_interval <= 0:
            raise ConfigError("--poll-interval must be positive")
        if self.tick_interval is not None and self.tick_interval <= 0:
            raise ConfigError("--tick-interval must be positive")
        if self.claimers < 1:
            raise ConfigError(f"--claimers must be at least 1, got {self.claimers}")
        if self.grace < 0:
            raise ConfigError("--grace must not be negative")
        if self.idle_report_after <= 0:
            raise ConfigError("--idle-report-after must be positive")
        from ember.worker.loop import available_pipelines  # the pipelines import the SDK

        known = available_pipelines()
        unknown = [p for p in self.pipelines if p not in known]
        if unknown or not self.pipelines:
            raise ConfigError(
                f"unknown pipeline(s) {', '.join(unknown) or '(none given)'}; "
                f"available: {', '.join(known)}"
            )
