"""What every command module of the CLI shares: the terminal consoles and the progress bar."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

console = Console()
err_console = Console(stderr=True, soft_wrap=True)


def new_progress(unit: str = "requests", transient: bool = False) -> Progress:
    """A progress bar on stderr; `transient` ones vanish when done (the result says the rest)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        TimeElapsedColumn(),
        console=err_console,
        transient=transient,
    )
