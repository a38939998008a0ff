"""When is a run the client's measurement rather than the server's? Named rules, one place.

Each rule compares one self-awareness figure with a named threshold. A rule that fires makes the
run invalid (`valid: false`) and puts its reason first in `problems`; notes (failed requests,
token disagreements, a late worker start) are listed after them without invalidating.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from sagemeter.evidence.distribution import Distribution
from sagemeter.loadgen.result import Window
from sagemeter.transport.health import client_limits
from sagemeter.transport.health import pct as _pct

# A closed loop asked for C streams in flight; below this share the server saw less load.
CONCURRENCY_SHARE_MIN = 0.95
# Closed loop: the mean gap between a request's end and its successor's send, as a share of the
# mean request time: the throughput lost to the client.
CLOSED_GAP_SHARE_MAX = 0.01
# Open loop: sends later than scheduled (p99): the arrival process was not the one asked for.
SEND_LAG_P99_LIMIT_S = 0.010
# A worker started this long after the common start instant (a note, not invalidating).
START_LATE_NOTE_S = 0.05


@dataclass(frozen=True)
class Evidence:
    """The figures the rules look at."""

    mode: Literal["closed", "poisson", "trace"]
    asked_concurrency: int | None
    achieved_concurrency: float
    loop_lag_s: Distribution
    send_lag_s: Distribution
    mean_request_s: float | None
    worker_cpu_shares: Sequence[float]
    client_cpu_share_of_cores: float
    start_late_s: Sequence[float]
    window: Window
    requests_completed: int
    notes: Sequence[str] = field(default_factory=tuple)


def assess(evidence: Evidence) -> tuple[list[str], list[str]]:
    """(reasons the run is invalid, all problems: those reasons first, then the notes)."""
    invalid: list[str] = []
    if evidence.requests_completed == 0:
        invalid.append("no request completed")
    if not evidence.window.steady:
        invalid.append("no steady window: every stream needs two or more requests (run longer)")
    invalid += client_limits(
        evidence.loop_lag_s.p99, evidence.worker_cpu_shares, evidence.client_cpu_share_of_cores
    )
    asked = evidence.asked_concurrency
    if evidence.mode == "closed" and asked:
        share = evidence.achieved_concurrency / asked
        if share < CONCURRENCY_SHARE_MIN:
            invalid.append(
                f"achieved concurrency {evidence.achieved_concurrency:.1f} is {_pct(share)} of "
                f"the {asked} asked (< {_pct(CONCURRENCY_SHARE_MIN)}, CONCURRENCY_SHARE_MIN)"
            )
    send = evidence.send_lag_s
    if evidence.mode == "closed" and send.mean is not None and evidence.mean_request_s:
        share = send.mean / evidence.mean_request_s
        if share > CLOSED_GAP_SHARE_MAX:
            invalid.append(
                f"the client took {send.mean * 1e3:.2f} ms on average between a request's end "
                f"and the next send, {share * 100:.1f}% of a request "
                f"(> {_pct(CLOSED_GAP_SHARE_MAX)}, CLOSED_GAP_SHARE_MAX)"
            )
    if evidence.mode != "closed" and send.p99 is not None and send.p99 > SEND_LAG_P99_LIMIT_S:
        invalid.append(
            f"sends were late against the schedule: p99 {send.p99 * 1e3:.1f} ms "
            f"> {SEND_LAG_P99_LIMIT_S * 1e3:.0f} ms (SEND_LAG_P99_LIMIT_S)"
        )
    notes = list(evidence.notes)
    late = max(evidence.start_late_s, default=0.0)
    if late > START_LATE_NOTE_S:
        notes.append(f"a worker started {late * 1e3:.0f} ms after the common start instant")
    return invalid, invalid + notes
