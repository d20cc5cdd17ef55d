"""The Debian packages the tests need, and the versions of them this machine has or would get.

Standard library only: `make test` prints them first (scripts/debian_packages.py), before any
virtual environment exists, so that a run names what it tested with and can be reproduced.
"""

from __future__ import annotations

import shutil
import subprocess

PGTAP_PACKAGES = ("pgtap", "postgresql-15-pgtap")
CHROMIUM_PACKAGES = ("chromium",)
OBJDUMP_PACKAGES = ("binutils",)
TEST_PACKAGES = PGTAP_PACKAGES + OBJDUMP_PACKAGES + CHROMIUM_PACKAGES


def installed_version(package: str) -> str | None:
    """The installed version of a Debian package, or None (not installed, or no dpkg here)."""
    if not shutil.which("dpkg-query"):
        return None
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f", "${db:Status-Abbrev}${Version}", package],
        capture_output=True,
        text=True,
    )
    said = proc.stdout
    # "ii " is installed; anything else (removed, config files only) is not.
    if proc.returncode != 0 or not said.startswith("ii"):
        return None
    return said[3:].strip() or None


def candidate_version(package: str) -> str | None:
    """The version apt-get would install now, from the local package index, or None."""
    if not shutil.which("apt-cache"):
        return None
    proc = subprocess.run(["apt-cache", "policy", package], capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        key, _, value = line.strip().partition(":")
        if key == "Candidate" and value.strip() not in ("", "(none)"):
            return value.strip()
    return None


def describe(packages: tuple[str, ...] = TEST_PACKAGES) -> str:
    """One line a package: `name=version` (installed), or what apt-get would install."""
    lines = []
    for package in packages:
        have = installed_version(package)
        if have:
            lines.append(f"  {package}={have} (installed)")
            continue
        would = candidate_version(package)
        said = f"to install: {package}={would}" if would else "to install, version from apt-get"
        lines.append(f"  {package}: {said}")
    return "\n".join(lines)
