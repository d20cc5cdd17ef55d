"""`ember demo`: the sample corpus played through the host API, the worker, the report."""
