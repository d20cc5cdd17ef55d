"""`ember demo`: the sample corpus played through the host API, the worker, the report."""

DEFAULT_PORT = 8787  # the simulator's port, as in docs/sim.md; a free one if it is taken
DATABASE = "ember_demo"
