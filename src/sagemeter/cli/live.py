"""Live progress on stderr while a load run goes: elapsed against its duration, the requests
finished so far, and the time left.

Shown when stderr is a terminal (a rich bar that vanishes when the run ends), or forced with
SAGEMETER_PROGRESS=1 (then plain lines, about one a second, for logs and CI); SAGEMETER_PROGRESS=0
turns it off. stdout keeps only the result, so `--out`, pipes and JSON readers are unaffected.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)

from sagemeter.errors import UserError

PROGRESS_ENV = "SAGEMETER_PROGRESS"
PLAIN_EVERY_S = 1.0
BAR_EVERY_S = 0.5


def progress_mode(console: Console) -> str:
    """'bar', 'lines' or 'off', from SAGEMETER_PROGRESS and whether stderr is a terminal.

    A value other than 0/1 (or off/on) is one line, before any work."""
    asked = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if asked in ("", "auto"):
        return "bar" if console.is_terminal else "off"
    if asked in ("0", "off", "no", "false"):
        return "off"
    if asked in ("1", "on", "yes", "true"):
        return "bar" if console.is_terminal else "lines"
    raise UserError(f"{PROGRESS_ENV}={asked!r}: give 1 (always show progress), 0 (never) or auto")


def progress_line(label: str, elapsed_s: float, duration_s: float, done: int | None) -> str:
    """One line of a run's progress: `4 at once: 3/10 s, 52 requests done`."""
    digits = 1 if duration_s < 10 else 0
    clock = f"{min(elapsed_s, duration_s):.{digits}f}/{duration_s:.{digits}f} s"
    if elapsed_s > duration_s:
        clock += ", finishing the requests in flight"
    counted = "" if done is None else f", {done} requests done"
    return f"{label}: {clock}{counted}"


class LiveRuns:
    """Shows each load run while it goes (a `loadgen.loadrun.RunWatch`)."""

    def __init__(self, console: Console, mode: str, every_s: float | None = None) -> None:
        self.console = console
        self.mode = mode
        self.every_s = every_s or (BAR_EVERY_S if mode == "bar" else PLAIN_EVERY_S)

    @contextlib.contextmanager
    def watching(
        self, label: str, duration_s: float, done: Callable[[], int] | None
    ) -> Iterator[None]:
        if self.mode == "off":
            yield
            return
        began = time.perf_counter()
        stop = threading.Event()
        if self.mode == "bar":
            show, finish = self._bar(label, duration_s, done, began)
        else:

            def show() -> None:
                elapsed = time.perf_counter() - began
                line = progress_line(label, elapsed, duration_s, done() if done else None)
                self.console.print(line, highlight=False, markup=False)

            def finish() -> None:
                show()

        def loop() -> None:
            while not stop.wait(self.every_s):
                show()

        thread = threading.Thread(target=loop, name="sagemeter-progress", daemon=True)
        show()
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            finish()

    def _bar(
        self, label: str, duration_s: float, done: Callable[[], int] | None, began: float
    ) -> tuple[Callable[[], None], Callable[[], None]]:
        bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[clock]}"),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
            auto_refresh=False,
        )
        task = bar.add_task(label, total=duration_s or None, clock="")
        bar.start()

        def show() -> None:
            elapsed = time.perf_counter() - began
            line = progress_line("", elapsed, duration_s, done() if done else None)
            bar.update(task, completed=min(elapsed, duration_s), clock=line.removeprefix(": "))
            bar.refresh()

        return show, bar.stop
