"""Where a command's tables go: a terminal's width, full width for a file or pipe, or TSV.

Rich fits a table to the console's width and shortens what does not fit (`$0.…`); that is
right on a terminal and wrong in a file someone will read or parse later, so a console that
does not write to a terminal is given room for any table, and `--format tsv` writes the cells
as they are.
"""

from __future__ import annotations

from typing import IO, Any, Protocol

from rich.console import Console
from rich.table import Table

# Wide enough for any table Ember prints; rich does not pad a table to the console's width.
UNBOUNDED_WIDTH = 100_000


class Printer(Protocol):
    """What a table-printing function needs of its console: rich's Console or TsvConsole."""

    def print(self, renderable: Any = "", *args: Any, **kwargs: Any) -> None: ...


class TsvConsole:
    """The `print` a table-printing function needs, writing each table as TSV: a `# title`
    line, a header line, then one line per row (tabs and line breaks inside a cell become
    spaces, so a cell can never start another column or row)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self._first = True

    def print(self, renderable: Any = "", *args: Any, **kwargs: Any) -> None:
        if not isinstance(renderable, Table):
            self.stream.write(f"{_plain(renderable)}\n")
            return
        if not self._first:
            self.stream.write("\n")
        self._first = False
        if renderable.title:
            self.stream.write(f"# {_plain(renderable.title)}\n")
        columns = renderable.columns
        self.stream.write("\t".join(_plain(c.header) for c in columns) + "\n")
        cells = [list(c.cells) for c in columns]
        for row in zip(*cells, strict=True):
            self.stream.write("\t".join(_plain(cell) for cell in row) + "\n")


def _plain(value: Any) -> str:
    text = value.plain if hasattr(value, "plain") else str(value)
    return " ".join(text.replace("\t", " ").splitlines())


def console_for(stream: IO[str], fmt: str = "table") -> Printer:
    if fmt == "tsv":
        return TsvConsole(stream)
    if stream.isatty():
        return Console(file=stream)
    return Console(file=stream, width=UNBOUNDED_WIDTH, no_color=True, highlight=False)
