"""How far each machine's wall clock is from the driver's, and when that is too far to trust.

Records from several machines land on one timeline only through their wall clocks: the driver
picks the start instant on its own clock and tells each node that instant on the node's clock.
So each node's offset is measured: the driver reads its clock, asks the node for its
`time.time()`, reads its clock again; the node's offset is its reading minus the midpoint,
known to ± half that round trip. Of several round trips the tightest is kept (the one least
delayed by scheduling or the network).

The offset itself is corrected for; what can still distort the merged timeline is the
uncertainty, plus any drift between the readings taken before and after the run. Per-request
latencies (TTFT, TPOT, ITL) are measured on one machine's clock and are never touched by it;
what it moves is where one node's requests sit against another's: the edges of the steady
window (so throughput and achieved concurrency) and, in an open loop, the arrival schedule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

# Before a run: a node whose clock cannot be pinned down better than this is refused. Every
# instant of its requests on the merged timeline could be this far off, the same limit a late
# event loop is allowed (LOOP_LAG_P99_LIMIT_S).
CLOCK_UNCERTAINTY_MAX_S = 0.010
# After a run: a node's remaining error (uncertainty + drift) as a share of the span the merged
# figures are divided by (the steady window, or a batch's send-to-last-byte).
CLOCK_SPAN_SHARE_MAX = 0.01
# Open loop: arrivals from different nodes may be misplaced against each other by the remaining
# error; beyond the limit a late send is allowed (SEND_LAG_P99_LIMIT_S) the schedule is not the
# one asked for.
CLOCK_SCHEDULE_ERROR_MAX_S = 0.010
# An offset this large is corrected, but worth a note: the machines' clocks are not kept in step.
CLOCK_OFFSET_NOTE_S = 0.5
ROUND_TRIPS = 15


@dataclass(frozen=True)
class ClockReading:
    """A node's clock against the driver's: node − driver, ± uncertainty (seconds)."""

    offset_s: float
    uncertainty_s: float


def estimate_offset(samples: Sequence[tuple[float, float, float]]) -> ClockReading:
    """(driver before, node, driver after) readings → the tightest round trip's offset."""
    if not samples:
        raise ValueError("no clock samples")
    before, node, after = min(samples, key=lambda sample: sample[2] - sample[0])
    return ClockReading(offset_s=node - (before + after) / 2, uncertainty_s=(after - before) / 2)


def read_offset(
    ask: Callable[[], float], now: Callable[[], float], round_trips: int = ROUND_TRIPS
) -> ClockReading:
    """Measure a node's offset: `ask` returns the node's clock, `now` reads the driver's."""
    samples = []
    for _ in range(round_trips):
        before = now()
        node = ask()
        samples.append((before, node, now()))
    return estimate_offset(samples)


def remaining_error_s(before: ClockReading, after: ClockReading | None) -> float:
    """What the correction can still be wrong by: the uncertainty plus the drift over the run."""
    drift = abs(after.offset_s - before.offset_s) if after is not None else 0.0
    worst = max(before.uncertainty_s, after.uncertainty_s if after is not None else 0.0)
    return worst + drift


def refusal(node: str, reading: ClockReading) -> str | None:
    """Why `node`'s clock cannot be aligned well enough to start a run; None when it can."""
    if reading.uncertainty_s <= CLOCK_UNCERTAINTY_MAX_S:
        return None
    return (
        f"{node}: its clock is known only to ±{reading.uncertainty_s * 1e3:.1f} ms (the "
        f"driver's tightest round trip to it took {reading.uncertainty_s * 2e3:.1f} ms; > "
        f"{CLOCK_UNCERTAINTY_MAX_S * 1e3:.0f} ms, CLOCK_UNCERTAINTY_MAX_S): run the driver "
        "inside the cluster's network"
    )


def clock_problems(
    node: str,
    before: ClockReading,
    after: ClockReading | None,
    span_s: float,
    span_name: str,
    open_loop: bool,
) -> tuple[list[str], list[str]]:
    """(reasons the merged figures cannot be trusted, notes) for one node's clock."""
    invalid: list[str] = []
    notes: list[str] = []
    error = remaining_error_s(before, after)
    if span_s > 0 and error > CLOCK_SPAN_SHARE_MAX * span_s:
        invalid.append(
            f"{node}: its clock is aligned only to ±{error * 1e3:.1f} ms, "
            f"{error / span_s * 100:.1f}% of the {span_s:.2f} s {span_name} "
            f"(> {CLOCK_SPAN_SHARE_MAX * 100:.0f}%, CLOCK_SPAN_SHARE_MAX)"
        )
    if open_loop and error > CLOCK_SCHEDULE_ERROR_MAX_S:
        invalid.append(
            f"{node}: its arrivals may sit up to {error * 1e3:.1f} ms off the schedule against "
            f"the other nodes' (> {CLOCK_SCHEDULE_ERROR_MAX_S * 1e3:.0f} ms, "
            "CLOCK_SCHEDULE_ERROR_MAX_S)"
        )
    if abs(before.offset_s) > CLOCK_OFFSET_NOTE_S:
        notes.append(
            f"{node}: its clock is {before.offset_s:+.3f} s off the driver's (corrected for; "
            "keep the machines on NTP)"
        )
    return invalid, notes
