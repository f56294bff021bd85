"""Rich console, progress bars and tables shared by every command."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.errors import MarkupError
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text


class _Console(Console):
    """rich's console, but a line whose data (a title, a pipeline name, a path) holds text that reads as a broken
    markup tag ("[/]", "[/x]") prints as written instead of raising ``MarkupError`` after the work is done. Sites
    escape what they interpolate (:func:`rich.markup.escape`); this is the net under the ones that do not."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        try:
            super().print(*objects, **kwargs)
        except MarkupError:
            super().print(*objects, **{**kwargs, "markup": False})

    def rule(self, title: Any = "", **kwargs: Any) -> None:
        try:
            super().rule(title, **kwargs)
        except MarkupError:
            super().rule(Text(str(title)), **kwargs)


console = _Console()
err_console = _Console(stderr=True)


class _Progress(Progress):
    """A progress bar that is cleared when its block raises: a failed command's output ends in its one error
    line, not under a half-filled bar (a finished bar stays, unless ``transient``)."""

    def __exit__(self, exc_type, exc_val, exc_tb) -> None:
        if exc_type is not None:
            self.live.transient = True
        super().__exit__(exc_type, exc_val, exc_tb)


def progress(transient: bool = False) -> Progress:
    """A progress bar with count, elapsed and remaining time (disabled automatically when not a terminal);
    cleared when the work inside it fails."""
    return _Progress(
        TextColumn("{task.description}", style="bold blue", markup=False),  # a description is data, not markup
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=transient,
    )


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def kv_table(title: str, rows: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> Table:
    """A two-column table of named values."""
    # values and titles are data (paths, ids), not markup: "[/bad]" in a folder name prints as written
    table = Table(title=Text(str(title)), show_header=False, title_justify="left")
    table.add_column("key", style="bold")
    table.add_column("value")
    items = rows.items() if isinstance(rows, Mapping) else rows
    for key, value in items:
        table.add_row(Text(str(key)), Text(_fmt(value)))
    return table


def records_table(title: str, records: list[Mapping[str, Any]], columns: list[str] | None = None) -> Table:
    """A table with one row per record."""
    columns = columns or (list(records[0]) if records else [])
    table = Table(title=Text(str(title)), title_justify="left")
    for col in columns:
        table.add_column(Text(str(col)))
    for rec in records:
        table.add_row(*(Text(_fmt(rec.get(c, ""))) for c in columns))
    return table
