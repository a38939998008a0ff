"""The driver side of a Ray run: the load generator's workers on every node of a Ray cluster.

One machine's client saturates near 30,000 streamed tokens a second; past that the same worker
processes (`transport/worker.py`, driven by `WorkerPlan`s) run on many machines. Here each live
node with a CPU gets one agent (`ray_agent.NodeAgent`, pinned to the node) that starts that
node's workers. A run goes:

1. every agent hands its workers their plans and waits until all are connected (`prepare`);
2. the driver measures every node's clock offset (`node_clocks`) and refuses a node it cannot
   pin down;
3. it picks one start instant on its own clock and tells each node that instant on the node's
   clock, so every record lands on one timeline;
4. it gathers every node's records; a node that dies or does not answer is reported as lost,
   never silently left out; the offsets are read again to see the drift.

Ray is an optional extra, imported only here (`pip install 'sagemeter[ray]'`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import re
import secrets
import socket
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from sagemeter import __version__
from sagemeter.errors import UserError
from sagemeter.transport.node_clocks import (
    ClockReading,
    clock_problems,
    read_offset,
    refusal,
)
from sagemeter.transport.pool import RunOutput, WorkerFailure
from sagemeter.transport.ray_agent import NodeAgent, NodeFacts, NodeOutput
from sagemeter.transport.worker import WorkerPlan

RAY_INSTALL_HINT = "pip install 'sagemeter[ray]'"
# A node's agent must be placed and its workers started within this long.
AGENT_START_TIMEOUT_S = 120.0
# Every worker connected and ready within this long of being handed its plan.
PREPARE_TIMEOUT_S = 120.0
# One clock read (a round trip to an agent) may take this long before the node counts as lost.
CLOCK_READ_TIMEOUT_S = 10.0
# Time from picking the start instant to the instant itself: telling every node must fit in it.
START_MARGIN_S = 0.5
# After the last request could have ended, how long a node may still take to answer.
RUN_GRACE_S = 60.0
# Ray Client's head starts a server process per client; on a busy head that start can miss the
# head's own deadline ("Initialization failure from server"). A new attempt starts a new one.
CLIENT_JOIN_ATTEMPTS = 3
CLIENT_JOIN_PAUSE_S = 2.0
# A HOST:PORT cluster address must accept a TCP connection within this long.
PROBE_TIMEOUT_S = 5.0
# Ray's own token settings: when the user set any of them, `--ray local` leaves its token alone.
_TOKEN_SETTINGS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")

_HOST_PORT = re.compile(r"^(?:ray://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>\d+)$")


def check_address(text: str) -> str:
    """`auto`, `local`, `ray://HOST:PORT` or `HOST:PORT`, else one clear line."""
    if text in ("auto", "local"):
        return text
    match = _HOST_PORT.match(text)
    if match is None or not 0 < int(match["port"]) < 65536:
        raise UserError(
            f"--ray {text!r}: give auto (the running cluster), local (a throwaway one on this "
            "machine), ray://HOST:PORT (Ray Client) or HOST:PORT (the head's GCS)"
        )
    return text


def require_ray() -> None:
    """A UserError saying how to install Ray when it is missing (without importing it: `local`
    must set Ray's loopback switch before the import)."""
    if importlib.util.find_spec("ray") is None:
        raise UserError(f"--ray needs Ray, which is not installed: {RAY_INSTALL_HINT}")


def import_ray() -> Any:
    """The `ray` module, or a UserError saying how to install it."""
    require_ray()
    import ray

    return ray


def connect(address: str) -> Any:
    """Join the cluster at `address` once per process; returns the `ray` module."""
    check_address(address)
    if address == "local":
        _local_cluster_env()
    ray = import_ray()
    if ray.is_initialized():
        return ray
    match = _HOST_PORT.match(address)
    if match is not None:
        _probe(address, match["host"].strip("[]"), int(match["port"]))
    options: dict[str, Any] = {}
    if address == "local":
        options = {"include_dashboard": False}
    attempts = CLIENT_JOIN_ATTEMPTS if address.startswith("ray://") else 1
    for attempt in range(1, attempts + 1):
        try:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False, **options)
            return ray
        except ConnectionAbortedError as exc:  # the head could not start this client's server
            with contextlib.suppress(Exception):
                ray.shutdown()
            if attempt == attempts:
                raise _join_refusal(address, exc, attempts) from None
            time.sleep(CLIENT_JOIN_PAUSE_S)
        except Exception as exc:  # Ray raises ConnectionError, ValueError, RuntimeError, …
            raise _join_refusal(address, exc, 1) from None
    raise AssertionError("unreachable: the last attempt returns or raises")


def _join_refusal(address: str, exc: BaseException, attempts: int) -> UserError:
    tried = f" after {attempts} attempts" if attempts > 1 else ""
    return UserError(f"--ray {address}: cannot join the Ray cluster{tried} ({_cause(exc)})")


def _local_cluster_env() -> None:
    """Settings for the throwaway cluster of `--ray local`, each unless the user set it.

    Its servers bind 127.0.0.1 only (Ray reads this switch when it is imported; on Linux it
    otherwise binds every interface). It asks for a token of its own, held only in this
    process's environment (`RAY_AUTH_TOKEN`, which the cluster's processes inherit), rather than
    the one Ray would otherwise create and leave in ~/.ray (which later turns on token checks for
    every `ray start` of the user's); with no file, a killed command leaves no token on disk.
    """
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if any(name in os.environ for name in _TOKEN_SETTINGS):
        return
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)


def join_for_batches(address: str) -> None:
    """`measure --ray`: join the cluster now (a bad address fails before any work) and let the
    batch sender find it (`batch.RAY_ENV`; the environment also reaches every wire it opens)."""
    require_ray()
    connect(address)
    os.environ["SAGEMETER_RAY"] = address


def _probe(address: str, host: str, port: int) -> None:
    """A clear line now rather than Ray retrying an unreachable address for minutes."""
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            pass
    except OSError as exc:
        raise UserError(
            f"--ray {address}: nothing answers at {host}:{port} ({exc.strerror or exc})"
        ) from None


def _cause(exc: BaseException) -> str:
    """The first line of Ray's error, and when Ray wraps the head's traceback in it (Ray Client's
    "Initialization failure from server:"), that traceback's last line, which names the cause."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        return f"{type(exc).__name__}: {lines[0]} {lines[-1][:300]}"
    return _first_line(exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else ""
    return f"{type(exc).__name__}: {line[:300]}" if line else type(exc).__name__


@dataclass(frozen=True)
class NodeSlot:
    """One node of the run: Ray's id and address for it, its CPUs and its workers."""

    index: int
    node_id: str
    address: str
    cores: int
    workers: int
    facts: NodeFacts

    @property
    def label(self) -> str:
        return f"node {self.index} ({self.address}, {self.node_id[:8]})"


@dataclass
class NodeRun:
    """What one node did in one run: its plans, clock and records, or why it was lost."""

    slot: NodeSlot
    plans: list[WorkerPlan]
    clock_before: ClockReading
    clock_after: ClockReading | None = None
    run: RunOutput | None = None
    lost: str | None = None


@dataclass
class ClusterRun:
    """Every node's run, and the survivors' records merged onto the driver's timeline."""

    run: RunOutput
    nodes: list[NodeRun] = field(default_factory=list)

    def lost_reasons(self) -> list[str]:
        """One line per node whose records are missing, saying what is missing."""
        reasons = []
        for node in self.nodes:
            if node.lost is None:
                continue
            streams = sum(len(plan.streams) for plan in node.plans)
            arrivals = sum(len(plan.arrivals) for plan in node.plans)
            share = f"{streams} streams'" if streams else f"{arrivals} arrivals'"
            reasons.append(
                f"{node.slot.label} was lost during the run ({node.lost}): its {share} "
                "requests are missing from the figures"
            )
        return reasons

    def clock_checks(
        self, span_s: float, span_name: str, open_loop: bool
    ) -> tuple[list[str], list[str]]:
        """(invalidating reasons, notes) from every surviving node's clock.

        Only records of two or more nodes can sit wrongly against each other: the records of a
        run that one node sent share its clock, whatever that clock's offset.
        """
        invalid: list[str] = []
        notes: list[str] = []
        survivors = [node for node in self.nodes if node.run is not None]
        for node in survivors:
            bad, noted = clock_problems(
                node.slot.label, node.clock_before, node.clock_after, span_s, span_name, open_loop
            )
            invalid += bad
            notes += noted
        return (invalid if len(survivors) > 1 else []), notes


class RayPool:
    """An agent on every live node of the cluster, driven like `pool.WorkerPool`."""

    def __init__(self, address: str, workers_per_node: int | None = None) -> None:
        self.started = time.perf_counter()
        self.ray = connect(address)
        self.address = address
        self.ray_version = str(self.ray.__version__)
        self.slots: list[NodeSlot] = []
        self.agents: list[Any] = []
        try:
            self._place_agents(workers_per_node)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def capacity(self) -> int:
        """Worker processes over all nodes."""
        return sum(slot.workers for slot in self.slots)

    @property
    def cores(self) -> int:
        """The CPUs the nodes give Ray (`ray start --num-cpus`), summed."""
        return sum(slot.cores for slot in self.slots)

    def _place_agents(self, workers_per_node: int | None) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self.ray
        nodes = [n for n in ray.nodes() if n.get("Alive") and n["Resources"].get("CPU", 0) >= 1]
        if not nodes:
            raise WorkerFailure("the Ray cluster has no live node with a CPU")
        agent_class = ray.remote(NodeAgent)
        wanted = []
        for node in nodes:
            cores = int(node["Resources"]["CPU"])
            workers = workers_per_node or cores
            agent = agent_class.options(
                num_cpus=min(workers, cores),
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
                max_restarts=0,
                max_task_retries=0,
            ).remote(workers, cores)
            self.agents.append(agent)
            wanted.append((node, cores, workers))
        answers = self._gather(
            [agent.facts.remote() for agent in self.agents], AGENT_START_TIMEOUT_S
        )
        problems = []
        for index, ((node, cores, workers), answer) in enumerate(zip(wanted, answers, strict=True)):
            label = f"node {index} ({node['NodeManagerAddress']}, {node['NodeID'][:8]})"
            if isinstance(answer, str):
                problems.append(f"{label}: its agent did not start ({answer})")
                continue
            if answer.sagemeter_version != __version__:
                problems.append(
                    f"{label} runs sagemeter {answer.sagemeter_version}, this machine "
                    f"{__version__}: install the same version on every node"
                )
            self.slots.append(
                NodeSlot(index, node["NodeID"], node["NodeManagerAddress"], cores, workers, answer)
            )
        if problems:
            raise WorkerFailure("; ".join(problems))

    def _gather(self, refs: list[Any], timeout_s: float) -> list[Any]:
        """Each ref's value, or a one-line reason (a string) for those that failed or are late."""
        ray = self.ray
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        done = set(ready)
        answers: list[Any] = []
        for ref in refs:
            if ref not in done:
                answers.append(f"no answer within {timeout_s:.0f} s")
                continue
            try:
                answers.append(ray.get(ref))
            except ray.exceptions.RayError as exc:
                answers.append(_first_line(exc))
        return answers

    def run_cluster(
        self,
        plans: list[WorkerPlan],
        start_at: float | None = None,
        watching: Callable[[], AbstractContextManager[None]] | None = None,
    ) -> ClusterRun:
        """Run the plans over the nodes from one start instant; lost nodes are reported.
        `watching` (a progress line) is entered once every node is prepared, for the sending."""
        ray = self.ray
        groups = deal(plans, [slot.workers for slot in self.slots])
        used = [
            (slot, agent, group)
            for slot, agent, group in zip(self.slots, self.agents, groups, strict=True)
            if group
        ]
        answers = self._gather(
            [agent.prepare.remote(group) for _, agent, group in used], PREPARE_TIMEOUT_S
        )
        failed = [
            f"{slot.label}: {answer}"
            for (slot, _, _), answer in zip(used, answers, strict=True)
            if answer is not None
        ]
        if failed:
            raise WorkerFailure("; ".join(failed))
        nodes = [NodeRun(slot, group, self._read_clock(agent)) for slot, agent, group in used]
        refused = [r for r in (refusal(n.slot.label, n.clock_before) for n in nodes) if r]
        if refused and len(nodes) > 1:  # one node's records share its clock, whatever it is
            raise WorkerFailure("; ".join(refused))
        wall_start = start_at if start_at is not None else time.time() + START_MARGIN_S
        startup_s = time.perf_counter() - self.started + max(0.0, wall_start - time.time())
        cpu_before = time.process_time()
        refs = [
            agent.start.remote(wall_start + node.clock_before.offset_s)
            for node, (_, agent, _) in zip(nodes, used, strict=True)
        ]
        limit = max(0.0, wall_start - time.time()) + _run_limit_s(plans)
        with watching() if watching is not None else contextlib.nullcontext():
            outputs = self._gather(refs, limit)
        driver_cpu_s = time.process_time() - cpu_before
        for node, (_, agent, _), output in zip(nodes, used, outputs, strict=True):
            if isinstance(output, NodeOutput) and output.run is not None:
                node.run = output.run
            else:
                node.lost = output.failure if isinstance(output, NodeOutput) else str(output)
                with contextlib.suppress(ray.exceptions.RayError):
                    ray.kill(agent, no_restart=True)
                continue
            with contextlib.suppress(ray.exceptions.RayError):
                node.clock_after = self._read_clock(agent)
        runs = [node.run for node in nodes if node.run is not None]
        merged = _merge(runs, wall_start, startup_s, driver_cpu_s)
        return ClusterRun(run=merged, nodes=nodes)

    def run(self, plans: list[WorkerPlan], cores: int, start_at: float | None = None) -> RunOutput:
        """`WorkerPool.run`'s contract: the merged run, or WorkerFailure when a node was lost or
        the nodes' clocks cannot be trusted over the run (the batch then does not count)."""
        del cores  # the nodes' own CPUs count, not this machine's
        cluster = self.run_cluster(plans, start_at)
        problems = cluster.lost_reasons()
        records = cluster.run.records
        if records and not problems:
            span_s = (max(r.end_us for r in records) - min(r.send_us for r in records)) * 1e-6
            problems, _ = cluster.clock_checks(span_s, "batch", open_loop=False)
        if problems:
            raise WorkerFailure("; ".join(problems))
        return cluster.run

    def _read_clock(self, agent: Any) -> ClockReading:
        ray = self.ray
        return read_offset(
            lambda: float(ray.get(agent.clock.remote(), timeout=CLOCK_READ_TIMEOUT_S)), time.time
        )

    def close(self) -> None:
        """Stop every agent (its workers exit with it) and give its CPUs back to Ray."""
        ray = self.ray
        for agent in self.agents:
            with contextlib.suppress(ray.exceptions.RayError):
                ray.get(agent.close.remote(), timeout=CLOCK_READ_TIMEOUT_S)
            with contextlib.suppress(ray.exceptions.RayError):
                ray.kill(agent, no_restart=True)
        self.agents = []


def deal(plans: list[WorkerPlan], capacities: list[int]) -> list[list[WorkerPlan]]:
    """The plans per node, in node order: each node as even a share of its workers as the count
    allows (a node with more workers takes more), contiguous so global worker numbers stay."""
    if len(plans) > sum(capacities):
        raise ValueError(f"{len(plans)} plans for {sum(capacities)} workers")
    counts = [0] * len(capacities)
    for _ in plans:
        free = [k for k, capacity in enumerate(capacities) if counts[k] < capacity]
        chosen = min(free, key=lambda k: (counts[k] / capacities[k], k))
        counts[chosen] += 1
    groups, at = [], 0
    for count in counts:
        groups.append(plans[at : at + count])
        at += count
    return groups


def _run_limit_s(plans: list[WorkerPlan]) -> float:
    """How long after the start every node must have answered: the sending time (none for a
    batch), every try of a request running to its timeout with the waits between, a grace."""
    longest = 0.0
    for plan in plans:
        sending = plan.duration_s if plan.requests_per_stream == 0 else 0.0
        tries = 1 + plan.retry.retries
        waits = plan.retry.max_s * plan.retry.retries
        longest = max(longest, sending + plan.timeout_s * tries + waits)
    return longest + RUN_GRACE_S


def _merge(
    runs: list[RunOutput], wall_start: float, startup_s: float, driver_cpu_s: float
) -> RunOutput:
    """The nodes' runs as one (their records already share the start instant)."""
    return RunOutput(
        wall_start=wall_start,
        startup_s=startup_s,
        records=sorted((r for run in runs for r in run.records), key=lambda r: r.send_us),
        loop_lag_us=[lag for run in runs for lag in run.loop_lag_us],
        workers=sorted((w for run in runs for w in run.workers), key=lambda w: w.worker),
        parent_cpu_s=driver_cpu_s + sum(run.parent_cpu_s for run in runs),
        cores=sum(run.cores for run in runs),
    )
