"""Embedded engines the assistant started (`start_local`), kept until `stop_local` or shutdown.

One engine per checkpoint: asking again for a running one returns it. They are children of the
server, bound to 127.0.0.1, and stopped when the server stops (an engine also ends by itself
when its parent goes away, since it watches its stdin).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread

from sagemeter.engines.checkpoints import resolve_checkpoint
from sagemeter.engines.llamacpp import LocalEngine


@dataclass
class Started:
    engine: LocalEngine
    already_running: bool


class LocalEngines:
    """The server's running engines, by checkpoint name."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._engines: dict[str, LocalEngine] = {}
        self._lock = anyio.Lock()

    async def start(self, spec: str, *, parallel: int, port: int) -> Started:
        """Start the engine for checkpoint `spec`, or return the one already running."""
        async with self._lock:
            checkpoint = await anyio.to_thread.run_sync(resolve_checkpoint, spec)
            running = self._engines.get(checkpoint.name)
            if running is not None and running.is_running():
                return Started(running, already_running=True)
            engine = LocalEngine(
                checkpoint,
                parallel=parallel,
                port=port,
                log_path=self.log_dir / f"engine-{checkpoint.name}.log",
            )
            try:
                # Not abandoned on cancellation: the start finishes, then the engine is stopped.
                await anyio.to_thread.run_sync(engine.start)
            except BaseException:
                engine.stop()
                raise
            self._engines[checkpoint.name] = engine
            return Started(engine, already_running=False)

    def running(self) -> dict[str, LocalEngine]:
        return {name: e for name, e in self._engines.items() if e.is_running()}

    def stop(self, name: str | None) -> tuple[list[str], list[str]]:
        """Stop one engine (by checkpoint name) or all; returns (stopped, not running)."""
        names = [name] if name is not None else list(self._engines)
        stopped, absent = [], []
        for each in names:
            engine = self._engines.pop(each, None)
            if engine is not None and engine.is_running():
                engine.stop()
                stopped.append(each)
            else:
                absent.append(each)
        return stopped, absent

    def stop_all(self) -> None:
        self.stop(None)
