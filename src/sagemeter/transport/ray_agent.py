"""The node side of a Ray run: one agent per node, holding that node's worker processes.

The agent is a Ray actor (wrapped with `ray.remote` by `ray_pool.py`, so this module does not
import Ray). It does not time anything itself: it starts the same worker processes a single
machine uses (`pool.WorkerPool`, fresh interpreters running `transport/worker.py`), hands them
their plans, tells them the common start instant on this node's clock, and returns their
records. The Ray actor's own process (with Ray's threads in it) stays off the measured path.
"""

from __future__ import annotations

import platform
import socket
import sys
import time
from dataclasses import dataclass

from sagemeter import __version__
from sagemeter.transport.pool import RunOutput, WorkerFailure, WorkerPool, available_cores
from sagemeter.transport.worker import WorkerPlan


@dataclass(frozen=True)
class NodeFacts:
    """What a node says about itself when its agent starts."""

    hostname: str
    sagemeter_version: str
    python: str
    machine_cores: int


@dataclass
class NodeOutput:
    """A node's run, or why it could not run."""

    run: RunOutput | None = None
    failure: str | None = None


class NodeAgent:
    """That node's worker processes; pools are kept per size, so batches reuse them."""

    def __init__(self, workers: int, cores: int) -> None:
        self.cores = cores
        self.pools: dict[int, WorkerPool] = {workers: WorkerPool(workers)}
        self.prepared: WorkerPool | None = None

    def facts(self) -> NodeFacts:
        return NodeFacts(
            hostname=socket.gethostname(),
            sagemeter_version=__version__,
            python=f"{platform.python_implementation()} {sys.version.split()[0]}",
            machine_cores=available_cores(),
        )

    def clock(self) -> float:
        """This node's wall clock (the driver measures its offset from round trips)."""
        return time.time()

    def prepare(self, plans: list[WorkerPlan]) -> str | None:
        """Hand out the plans; None once every worker is connected and ready, else why not."""
        pool = self.pools.get(len(plans))
        if pool is None:
            pool = self.pools[len(plans)] = WorkerPool(len(plans))
        try:
            pool.prepare(plans)
        except WorkerFailure as exc:
            self._drop(pool)
            return str(exc)
        self.prepared = pool
        return None

    def start(self, wall_start: float) -> NodeOutput:
        """Start the prepared workers at `wall_start` (this node's clock) and gather."""
        pool, self.prepared = self.prepared, None
        if pool is None:
            return NodeOutput(failure="started before its plans were handed out")
        try:
            return NodeOutput(run=pool.start(self.cores, wall_start))
        except WorkerFailure as exc:
            self._drop(pool)
            return NodeOutput(failure=str(exc))

    def close(self) -> None:
        for pool in self.pools.values():
            pool.close()
        self.pools.clear()

    def _drop(self, pool: WorkerPool) -> None:
        """A pool whose worker failed is not reused."""
        self.pools = {size: kept for size, kept in self.pools.items() if kept is not pool}
        pool.close()
