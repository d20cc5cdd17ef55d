"""The worker: a sidecar that waits for work in PostgreSQL, calls models, writes outcomes back."""
