"""An installed wheel migrates a fresh database with no checkout in sight."""

from __future__ import annotations

import site
import subprocess
import sys
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_installed_outside_the_checkout_migrates(empty_db: str, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("ember-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    # The dependencies (psycopg and friends) come from this environment through a .pth line;
    # `ember` itself only from the wheel: a .pth line adds a directory, and the checkout's
    # editable-install .pth inside it is not processed from there.
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")

    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": empty_db, "HOME": str(workdir)}
    where = subprocess.run(
        [str(python), "-c", "import ember.migrate as m; print(m.__file__); print(m.sql_root())"],
        cwd=workdir,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert where[0].startswith(str(venv)), "ember is imported from the installed wheel"
    assert where[1].startswith(str(venv)) and not where[1].startswith(str(ROOT))

    ember = venv / "bin" / "ember"
    out = subprocess.run(
        [str(ember), "migrate"], cwd=workdir, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "0001_core.sql" in out.stdout
    st = subprocess.run(
        [str(ember), "migrate", "--status"], cwd=workdir, env=env, capture_output=True, text=True
    )
    assert st.returncode == 0, st.stderr
    assert "pending" not in st.stdout and "functions current" in st.stdout
    with psycopg.connect(empty_db) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM ember.schema_migrations")}
    assert names == {p.name for p in (ROOT / "db" / "migrations").glob("*.sql")}
    assert not (ROOT / "worker" / "ember" / "sql").exists(), "the build leaves the checkout clean"
