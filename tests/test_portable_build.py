"""The embedded server runs on any x86-64 CPU, whatever the CPU of the machine running the tests.

A developer's machine with AVX-512 runs an AVX-512 build of pgvector without complaint, so a
test that only runs the server there cannot see the regression; these read the machine code.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from pathlib import Path

import psycopg
import pytest

from ember.embedded import bin_dir
from evex import DISPATCHED, avx512_by_function, undispatched

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64", reason="AVX-512 is an x86-64 instruction set"
)


def _pkglibdir() -> Path:
    out = subprocess.run(
        [str(bin_dir() / "pg_config"), "--pkglibdir"], check=True, capture_output=True, text=True
    )
    return Path(out.stdout.strip())


@pytest.mark.parametrize(
    "binary",
    ["vector.so", "pg_trgm.so", "postgres"],
    ids=["pgvector", "pg_trgm", "server"],
)
def test_no_avx512_outside_runtime_dispatched_functions(binary: str) -> None:
    path = bin_dir() / binary if binary == "postgres" else _pkglibdir() / binary
    assert path.exists(), f"{path} is missing from the embedded build"
    bad = undispatched(avx512_by_function(path), DISPATCHED)
    assert bad == {}, (
        f"{path} uses AVX-512 in functions that do not check the CPU first, so it dies with "
        f"SIGILL on CPUs without AVX-512 (most AMD EPYC before Zen 4): {', '.join(bad)}"
    )


_SOURCE = r"""
#include <immintrin.h>
__attribute__((target("avx512f"))) float SumAvx512(const float *a) {
    return _mm512_reduce_add_ps(_mm512_loadu_ps(a));
}
__attribute__((target("avx512f"))) float plain_sum(const float *a) {
    return _mm512_reduce_add_ps(_mm512_loadu_ps(a));
}
__attribute__((target("avx512f"))) int mask_count(const float *a) {
    return __builtin_popcount(_mm512_cmp_ps_mask(_mm512_loadu_ps(a), _mm512_setzero_ps(), 14));
}
float portable_sum(const float *a) { return a[0] + a[1]; }
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build the probe library")
def test_the_guard_names_each_undispatched_avx512_function(tmp_path: Path) -> None:
    """The guard itself can fail: a library built here with AVX-512 in three functions."""
    source = tmp_path / "probe.c"
    source.write_text(_SOURCE)
    library = tmp_path / "probe.so"
    subprocess.run(
        ["gcc", "-O2", "-shared", "-fPIC", "-o", str(library), str(source)],
        check=True,
        capture_output=True,
    )
    found = avx512_by_function(library)
    assert set(found) == {"SumAvx512", "plain_sum", "mask_count"}
    assert set(undispatched(found, DISPATCHED)) == {"plain_sum", "mask_count"}
    assert undispatched(found, re.compile("never")) == dict(sorted(found.items()))


def test_an_hnsw_index_builds_and_scans_on_the_embedded_server(db: str) -> None:
    """What crashed with SIGILL on the old build, end to end on this machine's CPU."""
    with psycopg.connect(db) as conn:
        conn.execute("CREATE TEMP TABLE probe (id int, v vector(3), h halfvec(3))")
        conn.execute(
            # Distinct directions, so the nearest row to row 200's own vector is row 200.
            "INSERT INTO probe SELECT i, a::vector, a::halfvec"
            " FROM generate_series(1, 300) i, LATERAL (SELECT ARRAY[cos(i), sin(i), 0.5] a) p"
        )
        conn.execute("CREATE INDEX ON probe USING hnsw (v vector_cosine_ops)")
        conn.execute("CREATE INDEX ON probe USING hnsw (h halfvec_cosine_ops)")
        conn.execute("SET LOCAL enable_seqscan = off")
        for column in ("v", "h"):
            target = f"(SELECT {column} FROM probe WHERE id = 200)"
            query = f"SELECT id FROM probe ORDER BY {column} <=> {target} LIMIT 1"
            plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN {query}"))
            assert "Index Scan using probe_" in plan
            assert conn.execute(query).fetchone() == (200,)
        norm = conn.execute("SELECT l2_normalize('[3,4]'::vector)::text").fetchone()
        assert norm == ("[0.6,0.8]",)
