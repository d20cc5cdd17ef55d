"""Where `make test-citus` finds Citus, and the one line it prints when it finds none."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ember import citus

ROOT = Path(__file__).resolve().parents[1]


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ember.citus"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_neither_source_nor_installation_is_one_line_naming_both(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "citus.tar.gz"
    env = {k: v for k, v in os.environ.items() if k != "CITUS_PG_CONFIG"}
    env |= {"CITUS_SOURCE": str(missing), "EMBER_HOME": str(tmp_path)}
    res = _run(env)
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert str(missing) in lines[0] and "CITUS_PG_CONFIG" in lines[0]


def test_an_archive_that_is_not_the_release_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "citus.tar.gz"
    fake.write_bytes(b"not citus")
    monkeypatch.setenv("CITUS_SOURCE", str(fake))
    monkeypatch.delenv("CITUS_PG_CONFIG", raising=False)
    with pytest.raises(citus.CitusError, match="sha256"):
        citus.install(tmp_path)


def test_a_pg_config_without_citus_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ember.embedded import bin_dir

    monkeypatch.setenv("CITUS_PG_CONFIG", str(bin_dir() / "pg_config"))
    with pytest.raises(citus.CitusError, match=r"no citus\.so"):
        citus.install(tmp_path)


def test_a_pg_config_that_is_not_there_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CITUS_PG_CONFIG", str(tmp_path / "pg_config"))
    with pytest.raises(citus.CitusError, match="not a file"):
        citus.install(tmp_path)


def test_a_clone_made_elsewhere_finds_the_source_beside_its_origin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CITUS_SOURCE", raising=False)
    origin = tmp_path / "work" / "main"
    archive = tmp_path / "work" / "shared" / "citus" / f"citus-{citus.CITUS_VERSION}.tar.gz"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"")
    subprocess.run(["git", "init", "-q", str(origin)], check=True)
    clone = tmp_path / "elsewhere" / "ember-ci"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True, capture_output=True)
    assert citus.source_archive(clone) == archive
    # Beside the checkout itself comes first; with neither, the first place is the one named.
    near = tmp_path / "elsewhere" / "shared" / "citus" / archive.name
    assert citus.source_archive(clone) != near
    near.parent.mkdir(parents=True)
    near.write_bytes(b"")
    assert citus.source_archive(clone) == near
    assert (
        citus.source_archive(tmp_path / "lone" / "ember")
        == tmp_path / "lone" / "shared" / ("citus") / archive.name
    )
