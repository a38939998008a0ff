"""The parent side: start the worker processes, start them together, gather their records.

Workers are fresh interpreters (`python -m sagemeter.transport.worker`, the spawn model: nothing
inherited but the plan) talking pickles over their stdin and stdout. They are started through
`subprocess` rather than `multiprocessing`'s spawn, because the latter re-imports the parent's
main module in every child (the whole CLI), which costs a few tenths of a second per worker.
The parent only waits while they run, so its CPU stays out of the way. A pool runs as many plans
as it is given, one after the other (a measurement's batches), until it is closed.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, cast

from sagemeter.parentwatch import child_env
from sagemeter.request_record import RequestRecord
from sagemeter.transport.worker import (
    FAILED,
    READY,
    WorkerOutput,
    WorkerPlan,
    receive_message,
    send_message,
)

START_MARGIN_S = 0.05
READY_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 5.0


@dataclass
class WorkerSummary:
    """What the parent keeps of each worker besides its records."""

    worker: int
    loop: str
    requests: int
    run_s: float
    cpu_run_s: float
    cpu_total_s: float
    start_late_s: float


def available_cores() -> int:
    """Cores this process may run on (the affinity mask where the platform has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def split_count(total: int, parts: int, part: int) -> range:
    """The `part`-th of `parts` contiguous slices of range(total); the remainder goes first."""
    base, extra = divmod(total, parts)
    start = part * base + min(part, extra)
    return range(start, start + base + (1 if part < extra else 0))


class WorkerFailure(RuntimeError):
    """A worker could not run its plan (no connection, crash); the message says why."""


@dataclass
class RunOutput:
    """Every worker's records on one timeline (µs after `wall_start`), and what the run cost."""

    wall_start: float
    startup_s: float
    records: list[RequestRecord]
    loop_lag_us: list[int]
    workers: list[WorkerSummary] = field(default_factory=list)
    parent_cpu_s: float = 0.0
    cores: int = 1
    stopped_early: list[str] = field(default_factory=list)

    @property
    def client_cpu_s(self) -> float:
        """CPU seconds of all client processes while the run was on (workers + parent)."""
        return sum(w.cpu_run_s for w in self.workers) + self.parent_cpu_s


def _worker_env() -> dict[str, str]:
    """The parent's environment, with this package importable whatever the install, marked so
    the worker dies with this process (`sagemeter.parentwatch`)."""
    env = child_env(os.environ.copy())
    source_root = str(Path(__file__).resolve().parents[2])
    paths = [source_root, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


class WorkerPool:
    """`count` worker processes, started at once so they boot while the parent prepares.

    `shared_fd`: a descriptor every worker inherits under the same number (the run's nameless
    `DoneCount` file, which they map); -1 for none."""

    def __init__(self, count: int, shared_fd: int = -1) -> None:
        self.started = time.perf_counter()
        env = _worker_env()
        self.processes = [
            subprocess.Popen(
                [sys.executable, "-m", "sagemeter.transport.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                pass_fds=(shared_fd,) if shared_fd >= 0 else (),
            )
            for _ in range(count)
        ]

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self.close(abort=exc_type is not None)

    def close(self, abort: bool = False) -> None:
        """Close every worker's stdin (it exits after its current plan), then make sure.

        `abort` (an interrupt, an error): kill them at once, since a worker in the middle of a
        plan would otherwise keep sending until its deadline.
        """
        if abort:
            for process in self.processes:
                if process.poll() is None:
                    process.kill()
        for process in self.processes:
            if process.stdin is not None and not process.stdin.closed:
                process.stdin.close()
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        for process in self.processes:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()

    def run(self, plans: list[WorkerPlan], cores: int, start_at: float | None = None) -> RunOutput:
        """Hand out the plans, start every worker at one wall-clock instant, gather outputs."""
        self.prepare(plans)
        return self.start(cores, start_at)

    def prepare(self, plans: list[WorkerPlan]) -> None:
        """Hand out the plans and wait until every worker has connected and is ready.

        Split from `start` so a caller driving several machines (the Ray pool) can wait for
        all of them to be ready before it picks the common start instant.
        """
        if len(plans) != len(self.processes):
            raise ValueError(f"{len(plans)} plans for {len(self.processes)} workers")
        for process, plan in zip(self.processes, plans, strict=True):
            send_message(cast(IO[bytes], process.stdin), plan)
        failures = [self._await_ready(process) for process in self.processes]
        if any(failures):
            raise WorkerFailure(next(f for f in failures if f))

    def start(self, cores: int, start_at: float | None = None) -> RunOutput:
        """Start the prepared workers at `start_at` (wall clock; default: now) and gather."""
        wall_start = start_at if start_at is not None else time.time() + START_MARGIN_S
        startup_s = time.perf_counter() - self.started + max(0.0, wall_start - time.time())
        for process in self.processes:
            send_message(cast(IO[bytes], process.stdin), wall_start)
        cpu_before = time.process_time()
        outputs = [self._output(process) for process in self.processes]
        parent_cpu_s = time.process_time() - cpu_before
        broken = [o.failure for o in outputs if o.failure]
        if broken:
            raise WorkerFailure(broken[0])
        run = _combine(outputs, wall_start, startup_s, parent_cpu_s)
        run.cores = cores
        return run

    def _await_ready(self, process: subprocess.Popen[bytes]) -> str | None:
        line = cast(IO[bytes], process.stdout).readline()
        if line == READY:
            return None
        if line == FAILED:
            return self._output(process).failure or "a worker failed to start"
        process.wait(timeout=READY_TIMEOUT_S)
        return f"a worker exited at start (code {process.returncode}); see the lines above"

    @staticmethod
    def _output(process: subprocess.Popen[bytes]) -> WorkerOutput:
        try:
            output: WorkerOutput = receive_message(cast(IO[bytes], process.stdout))
        except (EOFError, pickle.UnpicklingError):
            process.wait()
            raise WorkerFailure(
                f"a worker died during the run (code {process.returncode}); see the lines above"
            ) from None
        return output


def _combine(
    outputs: list[WorkerOutput], wall_start: float, startup_s: float, parent_cpu_s: float
) -> RunOutput:
    records = [record for output in outputs for record in output.records]
    records.sort(key=lambda record: record.send_us)
    summaries = [
        WorkerSummary(
            worker=o.worker,
            loop=o.loop,
            requests=len(o.records),
            run_s=o.run_s,
            cpu_run_s=o.cpu_run_s,
            cpu_total_s=o.cpu_total_s,
            start_late_s=o.start_late_s,
        )
        for o in outputs
    ]
    return RunOutput(
        wall_start=wall_start,
        startup_s=startup_s,
        records=records,
        loop_lag_us=[lag for output in outputs for lag in output.loop_lag_us],
        workers=summaries,
        parent_cpu_s=parent_cpu_s,
        stopped_early=[o.stopped_early for o in outputs if o.stopped_early],
    )
