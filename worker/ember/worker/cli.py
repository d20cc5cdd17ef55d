"""`ember worker`: environment, startup checks, and the asyncio entry point.

Its flags are defined in ember.commands.worker, which `ember --help` reads without importing this.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from datetime import timedelta

from ember.modelaccess import ConfigError, model_access
from ember.worker.calls import make_client


def run_worker(args: argparse.Namespace) -> int:
    from ember.worker import logs
    from ember.worker.config import WorkerConfig
    from ember.worker.loop import Worker, available_pipelines

    secrets = [os.environ.get("ANTHROPIC_API_KEY", "")]
    logs.setup(level=args.log_level, fmt=args.log_format, secrets=secrets)
    try:
        access = model_access()
        pipelines = [p.strip() for p in args.pipelines.split(",") if p.strip()] or list(
            available_pipelines()
        )
        if args.database_url:
            url = args.database_url
        else:
            from ember.config import database_url

            url = database_url()
        config = WorkerConfig(
            database_url=url,
            name=args.name,
            pipelines=pipelines,
            concurrency=args.concurrency,
            claimers=args.claimers,
            lease=timedelta(seconds=args.lease),
            poll_interval=args.poll_interval,
            tick_interval=args.tick_interval,
            grace=args.grace,
            metrics_port=args.metrics_port,
            metrics_host=args.metrics_host,
            idle_report_after=args.idle_report_after,
        )
        config.check()
    except ConfigError as exc:
        print(f"ember worker: {exc}", file=sys.stderr)
        return 2

    from ember.worker import memtrace

    memtrace.start_from_env()

    async def main() -> int:
        return await Worker(config, make_client(access)).run()

    return asyncio.run(main())
