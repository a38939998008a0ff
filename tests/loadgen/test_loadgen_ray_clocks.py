"""Clocks across Ray nodes: each node's offset measured, corrected for, and judged.

The cluster test runs a worker node whose wall clock is really 2 s ahead (libfaketime,
preloaded into every process of that node, `LD_PRELOAD` + `FAKETIME=+2`): the offset must be
measured as +2 s, the node told the start instant on its own clock, and the merged figures stay
within 2% of truth. Without the correction that node would start 2 s before the other and its
records would sit 2 s apart from theirs: the steady window and the throughput would be wrong by
far more than 2%.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.transport.node_clocks import (
    CLOCK_UNCERTAINTY_MAX_S,
    ClockReading,
    clock_problems,
    estimate_offset,
    read_offset,
    refusal,
    remaining_error_s,
)
from sagemeter.transport.pool import RunOutput
from sagemeter.transport.ray_agent import NodeFacts
from sagemeter.transport.ray_pool import ClusterRun, NodeRun, NodeSlot, _cause, deal
from sagemeter.transport.worker import WorkerPlan
from tests.ray_nodes import (
    LoopbackCluster,
    assert_valid_unless_client_bound,
    start_loopback_cluster,
)

pytestmark = pytest.mark.alone  # timing against truth: the CPU to itself

# Debian's libfaketime (.ci/run installs it), wherever the architecture puts it.
FAKETIME = next(iter(sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))), None)
TRUTH = TruthTiming(ttft_s=0.05, itl_s=0.004)


def test_the_tightest_round_trip_gives_the_offset() -> None:
    # (driver before, node, driver after): the node is 2 s ahead; the second trip is tightest.
    samples = [(10.0, 12.004, 10.010), (20.0, 22.0005, 20.001), (30.0, 32.03, 30.050)]
    reading = estimate_offset(samples)
    assert reading.offset_s == pytest.approx(2.0)
    assert reading.uncertainty_s == pytest.approx(0.0005)
    with pytest.raises(ValueError):
        estimate_offset([])


def test_read_offset_asks_the_node_between_two_readings_of_the_driver() -> None:
    ticks = iter([1.0, 1.002, 2.0, 2.0004, 3.0, 3.01])
    node = iter([6.001, 7.0002, 8.005])
    reading = read_offset(lambda: next(node), lambda: next(ticks), round_trips=3)
    assert reading.offset_s == pytest.approx(5.0)
    assert reading.uncertainty_s == pytest.approx(0.0002)


def test_a_clock_that_cannot_be_pinned_down_is_refused() -> None:
    assert refusal("node 1", ClockReading(3.0, CLOCK_UNCERTAINTY_MAX_S)) is None
    why = refusal("node 1", ClockReading(0.0, 0.025))
    assert why is not None and why.startswith("node 1: its clock is known only to ±25.0 ms")
    assert "CLOCK_UNCERTAINTY_MAX_S" in why


def test_remaining_error_is_uncertainty_plus_drift() -> None:
    before, after = ClockReading(2.0, 0.0004), ClockReading(2.003, 0.0006)
    assert remaining_error_s(before, after) == pytest.approx(0.0036)
    assert remaining_error_s(before, None) == pytest.approx(0.0004)


def test_clock_problems_weigh_the_error_against_what_it_would_distort() -> None:
    good = ClockReading(0.0, 0.0005)
    assert clock_problems("n", good, good, 10.0, "steady window", open_loop=True) == ([], [])
    # 30 ms of drift: 1.5% of a 2 s window, and beyond the open loop's 10 ms.
    drifted = ClockReading(0.03, 0.0005)
    invalid, _ = clock_problems("n", good, drifted, 2.0, "steady window", open_loop=True)
    assert len(invalid) == 2
    assert "CLOCK_SPAN_SHARE_MAX" in invalid[0] and "1.5% of the 2.00 s steady window" in invalid[0]
    assert "CLOCK_SCHEDULE_ERROR_MAX_S" in invalid[1]
    # The same error over a 20 s window of a closed loop is within the limit.
    assert clock_problems("n", good, drifted, 20.0, "steady window", open_loop=False)[0] == []
    # A large offset is corrected for, and noted.
    ahead = ClockReading(2.0, 0.0005)
    invalid, notes = clock_problems("n", ahead, ahead, 10.0, "batch", open_loop=False)
    assert invalid == [] and notes == [
        "n: its clock is +2.000 s off the driver's (corrected for; keep the machines on NTP)"
    ]


def _cluster_run(*readings: tuple[ClockReading, ClockReading]) -> ClusterRun:
    """A finished run of one node per (before, after) reading (the clock checks read only that)."""
    nodes = []
    for index, (before, after) in enumerate(readings):
        facts = NodeFacts(hostname="h", sagemeter_version="0", python="3", machine_cores=1)
        slot = NodeSlot(index, f"{index:056x}", "10.0.0.9", 1, 1, facts)
        run = RunOutput(wall_start=0.0, startup_s=0.0, records=[], loop_lag_us=[])
        nodes.append(NodeRun(slot, [], before, after, run=run))
    return ClusterRun(
        run=RunOutput(wall_start=0.0, startup_s=0.0, records=[], loop_lag_us=[]), nodes=nodes
    )


def test_clocks_matter_only_between_two_or_more_nodes() -> None:
    good, drifted = ClockReading(0.0, 0.0005), ClockReading(0.05, 0.0005)
    # One node alone: its records share its clock, so even a drifting one distorts nothing.
    alone = _cluster_run((good, drifted))
    assert alone.clock_checks(2.0, "steady window", open_loop=True) == ([], [])
    pair = _cluster_run((good, good), (good, drifted))
    invalid, _ = pair.clock_checks(2.0, "steady window", open_loop=False)
    assert len(invalid) == 1 and invalid[0].startswith("node 1 (10.0.0.9, 00000000)")


def _plans(count: int) -> list[WorkerPlan]:
    return [
        WorkerPlan(
            worker=index,
            host="127.0.0.1",
            port=1,
            tls=False,
            server_name="127.0.0.1",
            payload=b"",
            duration_s=1.0,
            timeout_s=1.0,
        )
        for index in range(count)
    ]


def test_a_refused_join_names_the_heads_own_cause() -> None:
    """Ray Client wraps the head's traceback after "Initialization failure from server:"; its
    first line alone says nothing, so the line the user sees ends with the traceback's last."""
    wrapped = ConnectionAbortedError(
        "Initialization failure from server:\nTraceback (most recent call last):\n"
        '  File "proxier.py", line 778, in Datapath\n'
        "RuntimeError: Proxy failed to Connect to backend!\n"
    )
    assert _cause(wrapped) == (
        "ConnectionAbortedError: Initialization failure from server: "
        "RuntimeError: Proxy failed to Connect to backend!"
    )
    assert _cause(ConnectionError("no head at 127.0.0.1:1\nmore")) == (
        "ConnectionError: no head at 127.0.0.1:1"
    )


def test_plans_are_dealt_to_nodes_by_their_workers() -> None:
    def sizes(plans: int, capacities: list[int]) -> list[int]:
        return [len(group) for group in deal(_plans(plans), capacities)]

    assert sizes(2, [1, 1]) == [1, 1]
    assert sizes(1, [1, 1]) == [1, 0]
    assert sizes(3, [2, 2]) == [2, 1]
    assert sizes(6, [4, 2]) == [4, 2]  # a node with more workers takes more
    assert sizes(3, [4, 2]) == [2, 1]
    groups = deal(_plans(5), [2, 3])
    assert [plan.worker for group in groups for plan in group] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError):
        deal(_plans(3), [1, 1])


@pytest.fixture(scope="module")
def skewed_cluster() -> Iterator[LoopbackCluster]:
    """Head with this machine's clock, worker node 2 s ahead of it."""
    assert FAKETIME is not None, "install Debian's libfaketime (.ci/run does)"
    worker_env = {"LD_PRELOAD": str(FAKETIME), "FAKETIME": "+2"}
    started = start_loopback_cluster(worker_env=worker_env)
    try:
        yield started
    finally:
        started.stop()


@pytest.mark.slow
def test_a_node_whose_clock_is_2_s_ahead_is_measured_and_corrected(
    skewed_cluster: LoopbackCluster, sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    with running_truth_server(TRUTH) as url:
        args = ["load", url, "-c", "32", "--duration", "2.5s", "--out", "skew.json", "--raw"]
        process = subprocess.run(
            [sys.executable, "-m", "sagemeter", *args, "--ray", skewed_cluster.address],
            capture_output=True,
            text=True,
            env={**skewed_cluster.driver_env(sagemeter_env), "COLUMNS": "200"},
            cwd=tmp_path,
            timeout=300,
        )
    assert process.returncode == 0, process.stderr
    result = json.loads((tmp_path / "skew.json").read_text())
    # Ray lists the nodes in no fixed order: the worker node is the one 2 s ahead.
    head, worker = sorted(result["cluster"]["nodes"], key=lambda node: node["clock"]["offset_s"])
    # Within what each reading says it is sure of (half its tightest round trip), plus 1 ms.
    assert abs(head["clock"]["offset_s"]) <= head["clock"]["uncertainty_s"] + 0.001
    margin = worker["clock"]["uncertainty_s"] + 0.001
    assert worker["clock"]["offset_s"] == pytest.approx(2.0, abs=margin)
    assert worker["clock"]["offset_after_s"] == pytest.approx(2.0, abs=margin)
    assert worker["clock"]["remaining_error_s"] < 0.010
    assert_valid_unless_client_bound(result)
    assert result["output_tokens_per_second"] == pytest.approx(
        TRUTH.tokens_per_second(32, 256), rel=0.02
    )
    assert result["achieved_concurrency"] == pytest.approx(32, rel=0.03)
    # Both nodes' first requests left together on the driver's timeline.
    raw = result["raw"]["records"]
    first = {}
    for record in raw:
        first[record["stream"]] = min(first.get(record["stream"], 1 << 62), record["send_us"])
    assert max(first.values()) - min(first.values()) < 10_000
    notes = [p for p in result["problems"] if "s off the driver's (corrected for" in p]
    label = f"node {worker['node']} (127.0.0.1, {worker['node_id'][:8]})"
    assert len(notes) == 1 and notes[0].startswith(label)
    assert "+2000." in process.stdout or "+1999." in process.stdout  # the table's offset, ms
