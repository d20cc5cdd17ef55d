"""A cheap stand-in embedder for tests that run the whole pipeline (EMBER_EMBEDDER=
hashembed:HashEmbedder): words hashed into 384 dimensions, unit length. Loading all-MiniLM-L6-v2
costs seconds in every process; this exercises the vector side of search_memory without them."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence


class HashEmbedder:
    name = "hash-words-384"
    dimensions = 384

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vector = [0.0] * self.dimensions
            for word in re.findall(r"\w+", text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
                vector[int.from_bytes(digest, "big") % self.dimensions] += 1.0
            norm = math.sqrt(sum(x * x for x in vector)) or 1.0
            out.append([x / norm for x in vector])
        return out
