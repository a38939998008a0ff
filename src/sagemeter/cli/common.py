"""What every command module of the CLI shares: the terminal consoles, the progress bar, and
holding a served engine in the foreground."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from sagemeter.errors import EngineError
from sagemeter.printable import SafeConsole

console = SafeConsole()
err_console = SafeConsole(stderr=True, soft_wrap=True)


def new_progress(unit: str = "requests", transient: bool = False) -> Progress:
    """A progress bar on stderr with the time spent and an estimate of the time left (from
    the pace so far); `transient` ones vanish when done (the result says the rest)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=transient,
    )


class ServedEngine(Protocol):
    """An engine process `serve` runs: the embedded llama.cpp or vLLM."""

    log_path: Path

    def is_running(self) -> bool: ...

    def stop(self) -> None: ...


def serve_until_ctrl_c(
    engine: ServedEngine,
    *,
    serving: Callable[[], str],
    log_label: str,
    died: str,
    start: Callable[[], object] | None = None,
) -> None:
    """Say where the engine serves and hold it until Ctrl-C (or until it dies); it is stopped
    however this ends. A `start` given runs first, inside the same guard, so Ctrl-C while it
    starts also ends in "stopped"."""
    try:
        if start is not None:
            start()
        console.print(serving())
        console.print(f"{log_label}: {engine.log_path}; Ctrl-C stops it")
        while engine.is_running():
            time.sleep(0.5)
        raise EngineError(f"{died}; see {engine.log_path}")
    except KeyboardInterrupt:
        console.print("stopped")
    finally:
        engine.stop()
