"""Progress notifications and cancellation for the long tools (deploy, delete, measure).

The library reports progress through plain callbacks, some of them from a worker thread (the
SageMaker backend is blocking boto3). `Relay` turns those calls into MCP progress notifications,
in order, from either side. `in_worker` runs blocking work in a thread and makes a cancelled
request stop it: the work's next progress report raises `Interrupted`, a KeyboardInterrupt, so
the backend records the interruption exactly as it does for Ctrl-C (a deploy stays in the ledger,
and `list_endpoints` shows it).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from anyio.abc import TaskGroup
from mcp.server.mcpserver import Context

from sagemeter.sagemaker.redact import redact

T = TypeVar("T")
Note = tuple[float, float | None, str]


class Interrupted(KeyboardInterrupt):
    """The MCP request was cancelled; raised inside the worker thread at a progress report."""


class Relay:
    """One tool call's progress notifications, sent in the order they were posted."""

    def __init__(self, ctx: Context[Any, Any]) -> None:
        self._ctx = ctx
        self._send, self._receive = anyio.create_memory_object_stream[Note](math.inf)
        self._group: TaskGroup | None = None
        self._last = -math.inf

    async def __aenter__(self) -> Relay:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._forward)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self._send.close()
        assert self._group is not None
        return await self._group.__aexit__(exc_type, exc, tb)

    async def _forward(self) -> None:
        async with self._receive:
            async for progress, total, message in self._receive:
                await self._ctx.report_progress(progress, total, message)

    def post(self, progress: float, total: float | None, message: str) -> None:
        """Queue a notification (from the event loop); progress only ever goes up."""
        if progress <= self._last:
            return
        self._last = progress
        # Once the call has ended nobody is listening any more.
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._send.send_nowait((progress, total, redact(message)))

    def post_from_thread(self, progress: float, total: float | None, message: str) -> None:
        """Queue a notification from a worker thread started by `in_worker`."""
        anyio.from_thread.run_sync(self.post, progress, total, message)


async def in_worker(work: Callable[[Callable[[], None]], T], *, grace_s: float) -> T:
    """Run blocking `work(check)` in a thread; `check()` raises `Interrupted` once cancelled.

    On cancellation the caller waits (up to `grace_s`) for the work to reach its next `check()`
    and record the interruption, then the cancellation goes on.
    """
    cancelled = threading.Event()
    finished = threading.Event()

    def check() -> None:
        if cancelled.is_set():
            raise Interrupted

    def run() -> tuple[bool, T | None]:
        try:
            return True, work(check)
        except Interrupted:
            return False, None
        finally:
            finished.set()

    try:
        done, value = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        cancelled.set()
        with anyio.CancelScope(shield=True), anyio.move_on_after(grace_s):
            while not finished.is_set():
                await anyio.sleep(0.02)
        raise
    if not done:  # pragma: no cover - only a cancelled call sets the flag, and it raised above
        raise anyio.get_cancelled_exc_class()()
    return value  # type: ignore[return-value]
