"""One Citus cluster (a coordinator and two workers) for the whole run, stopped at the end.

`make test-citus` runs these tests; the cluster is built and started by `ember.citus`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.citus import Cluster

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    with Cluster(ROOT) as c:
        yield c
