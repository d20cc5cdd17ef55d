"""Ships db/ and functions/ inside the package as ember/sql/, so an installed wheel can migrate.

Everything else about the package is in pyproject.toml; this only extends build_py, because
package data must live inside the package directory and the SQL lives at the repository's top.
An editable install skips the copy and reads the checkout (ember.migrate.sql_root()).
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildWithSql(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "ember" / "sql"
        # A build directory left by an earlier build may hold files since removed from the tree.
        shutil.rmtree(target, ignore_errors=True)
        for sub in ("db/migrations", "functions"):
            for path in sorted((ROOT / sub).glob("*.sql")):
                dest = target / sub / path.name
                dest.parent.mkdir(parents=True, exist_ok=True)
                self.copy_file(str(path), str(dest))


setup(cmdclass={"build_py": BuildWithSql})
