"""`load`'s runs under the server-identity rule of measure/identity.py (the one place it lives).

The identity is read before the first run and again after every run: the one run, each level of
a sweep, each probe of an operating-point search, a session run. A run after which the server is
another one (another model, another model list, a restart) may hold both servers' replies: it is
made invalid with the reason first, and nothing more is run. The runs whose closing check still
saw the first server are kept as they were measured; the reason names what changed
(before → after) and after which run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from sagemeter.loadgen.loadrun import run_label
from sagemeter.loadgen.result import LoadResult
from sagemeter.loadgen.settings import LoadSettings
from sagemeter.results.server_identity import ServerIdentity

PREFIX = "server identity: "

Result = TypeVar("Result", bound=LoadResult)


class ServerChanged(Exception):
    """The server was another one after a run; `result` is that run's, made invalid."""

    def __init__(self, reason: str, result: LoadResult) -> None:
        super().__init__(reason)
        self.reason = reason
        self.result = result


def with_change(result: Result, reason: str) -> Result:
    """`result` made invalid by a change of the server, the reason first (once)."""
    why = PREFIX + reason
    if why in result.invalid_because:
        return result
    return result.model_copy(
        update={
            "valid": False,
            "invalid_because": [why, *result.invalid_because],
            "problems": [why, *result.problems],
        }
    )


class IdentityCheck(Protocol):
    """What the runs need of the server-identity watch (measure/identity.py's `IdentityWatch`,
    which sits above the load generator and hands itself in)."""

    changed: str | None  # what changed, once a check saw another server

    def check_blocking(self, label: str, between: str) -> str | None: ...

    def record(self) -> ServerIdentity | None: ...


class WatchedRuns:
    """Runs load runs between identity checks of one watch, already opened
    (`IdentityWatch.opened(target)` for a watch of an `http://HOST:PORT[/v1]` target)."""

    def __init__(self, watch: IdentityCheck) -> None:
        self.watch = watch

    def run(self, runner: Callable[[LoadSettings], Result], settings: LoadSettings) -> Result:
        """One run, then the check; a change raises ServerChanged holding the run made invalid."""
        label = run_label(settings)
        result = runner(settings)
        changed = self.watch.check_blocking(label, f"during or after the {label} run")
        if changed is not None:
            raise ServerChanged(changed, with_change(result, changed))
        return result

    def finish(self, result: Result) -> Result:
        """The whole result with what was read (`server_identity`), invalid after a change."""
        result = result.model_copy(update={"server_identity": self.watch.record()})
        if self.watch.changed is not None:
            result = with_change(result, self.watch.changed)
        return result
