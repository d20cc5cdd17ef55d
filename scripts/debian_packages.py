"""Print the Debian packages `make test` uses and their versions: the first lines of a run.

Standard library only (it runs before the virtual environment exists). The list is Ember's
(worker/ember/debian.py); `ember setup-test-tools` installs what is missing and prints the
versions installed.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "worker"))

from ember.debian import describe  # noqa: E402

print("==> Debian packages for the tests (hash-checked Python packages follow):", flush=True)
print(describe(), flush=True)
