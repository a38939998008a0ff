"""Small summaries every measurement shares: medians and the client's own CPU share (spreads are
sagemeter.evidence.distribution's)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from sagemeter.results import ClientShare


def median(values: Sequence[float]) -> float:
    return float(np.median(np.asarray(values, dtype=float)))


class CpuClock:
    """This process's CPU time and the calling thread's (the event loop's) since it was made.

    Both are kept: the process figure includes every thread (a progress bar redrawing, boto3's
    worker threads for SageMaker), the loop thread's is what competes with timing each event.
    """

    def __init__(self) -> None:
        self._process = time.process_time()
        self._thread = time.thread_time()

    def elapsed(self) -> tuple[float, float]:
        """(process, loop thread). The thread is read last at the start and first at the end, so
        its window lies inside the process's and its figure can never exceed the process's."""
        thread = time.thread_time() - self._thread
        return time.process_time() - self._process, thread


def client_share(calls: int, cpu: tuple[float, float], timed_wall_s: float) -> ClientShare | None:
    """The client's CPU (process, loop thread) against the wall time it timed."""
    if calls <= 0 or timed_wall_s <= 0:
        return None
    process_cpu, loop_cpu = cpu
    return ClientShare(
        calls=calls,
        client_cpu_s=process_cpu,
        loop_cpu_s=loop_cpu,
        timed_wall_s=timed_wall_s,
        cpu_per_call_ms=loop_cpu / calls * 1000.0,
        share=process_cpu / timed_wall_s,
        loop_share=loop_cpu / timed_wall_s,
    )
