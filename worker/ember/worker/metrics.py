"""The worker's Prometheus metrics, in a registry of its own (so tests can run several workers)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

TOKEN_KINDS = {
    "input_tokens": "input",
    "cache_read_input_tokens": "cache_read",
    "cache_creation_5m_input_tokens": "cache_write_5m",
    "cache_creation_1h_input_tokens": "cache_write_1h",
    "output_tokens": "output",
}


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.runs = Counter(
            "ember_worker_runs",
            "Finished runs",
            ["pipeline", "path", "model", "status"],
            registry=r,
        )
        self.call_seconds = Histogram(
            "ember_worker_call_seconds",
            "Model call latency",
            ["pipeline", "model"],
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
            registry=r,
        )
        self.tokens = Counter(
            "ember_worker_tokens", "Tokens by kind", ["pipeline", "model", "kind"], registry=r
        )
        self.claims = Counter("ember_worker_claims", "Successful claims", ["pipeline"], registry=r)
        self.cancels = Counter(
            "ember_worker_cancels", "Runs aborted on ember_cancel", ["pipeline"], registry=r
        )
        self.ticks = Counter("ember_worker_ticks", "tick() calls made by this worker", registry=r)
        self.hot_cache_shortfalls = Counter(
            "ember_worker_hot_cache_shortfalls",
            "Completed hot runs that read less than hot_cache_min_read_share of the old prefix "
            "from the prompt cache, by likely cause",
            ["model", "cause"],
            registry=r,
        )
        self.releases = Counter(
            "ember_worker_releases", "Runs given back on shutdown", ["pipeline"], registry=r
        )

    def observe_call(
        self, pipeline: str, model: str, seconds: float, usage: dict[str, int]
    ) -> None:
        self.call_seconds.labels(pipeline, model).observe(seconds)
        for key, kind in TOKEN_KINDS.items():
            if usage.get(key):
                self.tokens.labels(pipeline, model, kind).inc(usage[key])

    def serve(self, port: int, addr: str = "127.0.0.1") -> int:
        server, _ = start_http_server(port, addr=addr, registry=self.registry)
        return int(server.server_port)
