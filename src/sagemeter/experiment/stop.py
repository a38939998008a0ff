"""Why a run stops early, told from anywhere: a signal handler, the spend-cap watch, an MCP cancel.

The first request to stop is graceful: the step in progress ends at its next safe point (a
measurement is cancelled at once, a deploy at its next poll), then everything the run created is
deleted (an endpoint still Creating is waited out first). `Abandoned`, raised by a face on the
second Ctrl-C, skips that deletion; the run then says what still runs and what it costs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

# signal: Ctrl-C or SIGTERM; cap: the spend cap; cancelled: the MCP request was cancelled.
StopKind = Literal["signal", "cap", "cancelled"]


class Stopped(KeyboardInterrupt):
    """Raised inside a step once a stop was requested; carries the reason."""


class Abandoned(KeyboardInterrupt):
    """The person asked twice: leave what remains to `--resume` or `sagemeter sagemaker delete`."""


class StopFlag:
    """Set once, read from any thread."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._reason: str | None = None
        self._kind: StopKind | None = None
        self._lock = threading.Lock()

    def request(self, reason: str, kind: StopKind = "signal") -> bool:
        """Ask the run to stop; False when a stop was already asked for (the first reason wins)."""
        with self._lock:
            if self._event.is_set():
                return False
            self._reason, self._kind = reason, kind
            self._event.set()
            return True

    @property
    def kind(self) -> StopKind | None:
        return self._kind

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> str | None:
        return self._reason

    def check(self) -> None:
        """Raise `Stopped` once a stop was requested (called at a step's safe points)."""
        if self._event.is_set():
            raise Stopped(self._reason or "stopped")

    def wait(self, timeout_s: float) -> bool:
        return self._event.wait(timeout_s)


class CapWatch:
    """A thread that requests a stop once `spent()` reaches the cap."""

    def __init__(
        self, cap_usd: float, spent: Callable[[], float], stop: StopFlag, every_s: float = 0.5
    ) -> None:
        self.cap_usd = cap_usd
        self._spent = spent
        self._stop = stop
        self._every_s = every_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="spend-cap", daemon=True)

    def __enter__(self) -> CapWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=5)

    def _watch(self) -> None:
        while not self._done.is_set() and not self._stop.requested:
            spent = self._spent()
            if spent >= self.cap_usd:
                self._stop.request(
                    f"the spend cap: ${spent:,.2f} spent of max_cost_usd ${self.cap_usd:,.2f}",
                    "cap",
                )
                return
            self._done.wait(self._every_s)
