"""``ember sim``: a local Anthropic Messages API server with prompt-cache accounting.

See ``docs/sim.md``. The pieces: ``cache`` (positions, keys and the cache store),
``validate`` (400s), ``responders`` (what it answers), ``app`` (the ASGI app),
``server`` (in-process ``SimServer`` and the ``ember sim`` entry point).
"""

from .cache import CacheStore, Prompt, build_prompt
from .clock import ManualClock
from .log import LoggedRequest, RequestLog
from .models import ModelInfo, ModelTable, load_models
from .responders import (
    Echo,
    Fault,
    Hang,
    Heuristic,
    HostTurns,
    Reply,
    Responder,
    Scripted,
    SimRequest,
    Truncated,
    responder_from_name,
)
from .server import SimServer, main

__all__ = [
    "CacheStore",
    "Echo",
    "Fault",
    "Hang",
    "Heuristic",
    "HostTurns",
    "LoggedRequest",
    "ManualClock",
    "ModelInfo",
    "ModelTable",
    "Prompt",
    "Reply",
    "RequestLog",
    "Responder",
    "Scripted",
    "SimRequest",
    "SimServer",
    "Truncated",
    "build_prompt",
    "load_models",
    "main",
    "responder_from_name",
]
