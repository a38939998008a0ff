"""When is a run the client's measurement rather than the server's? Named rules, one place.

Each rule compares one self-awareness figure with a named threshold. A rule that fires makes the
run invalid (`valid: false`) and puts its reason first in `problems`; notes (failed requests,
token disagreements, a late worker start) are listed after them without invalidating.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from sagemeter.loadgen.result import Distribution, Window

# The client's event loop woke up this late (p99) for its 10 ms lag sampler: every timestamp
# taken on that loop may be as late, a large share of a typical 4–50 ms inter-token gap.
LOOP_LAG_P99_LIMIT_S = 0.010
# A closed loop asked for C streams in flight; below this share the server saw less load.
CONCURRENCY_SHARE_MIN = 0.95
# One worker process used this share of a core over its run: it was saturated.
WORKER_CPU_SHARE_MAX = 0.90
# All client processes together used this share of the cores they could run on.
CLIENT_CPU_SHARE_MAX = 0.90
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

    mode: Literal["closed", "poisson"]
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


def _pct(share: float) -> str:
    return f"{share * 100:.0f}%"


def assess(evidence: Evidence) -> tuple[list[str], list[str]]:
    """(reasons the run is invalid, all problems: those reasons first, then the notes)."""
    invalid: list[str] = []
    if evidence.requests_completed == 0:
        invalid.append("no request completed")
    if not evidence.window.steady:
        invalid.append("no steady window: every stream needs two or more requests (run longer)")
    lag = evidence.loop_lag_s.p99
    if lag is not None and lag > LOOP_LAG_P99_LIMIT_S:
        invalid.append(
            f"client event-loop lag p99 {lag * 1e3:.1f} ms > {LOOP_LAG_P99_LIMIT_S * 1e3:.0f} ms "
            "(LOOP_LAG_P99_LIMIT_S): the client could not keep up; add --workers or cores"
        )
    asked = evidence.asked_concurrency
    if evidence.mode == "closed" and asked:
        share = evidence.achieved_concurrency / asked
        if share < CONCURRENCY_SHARE_MIN:
            invalid.append(
                f"achieved concurrency {evidence.achieved_concurrency:.1f} is {_pct(share)} of "
                f"the {asked} asked (< {_pct(CONCURRENCY_SHARE_MIN)}, CONCURRENCY_SHARE_MIN)"
            )
    for worker, share in enumerate(evidence.worker_cpu_shares):
        if share > WORKER_CPU_SHARE_MAX:
            invalid.append(
                f"worker {worker} used {_pct(share)} of a core (> {_pct(WORKER_CPU_SHARE_MAX)}, "
                "WORKER_CPU_SHARE_MAX): it was saturated"
            )
    if evidence.client_cpu_share_of_cores > CLIENT_CPU_SHARE_MAX:
        invalid.append(
            f"the client used {_pct(evidence.client_cpu_share_of_cores)} of the cores "
            f"(> {_pct(CLIENT_CPU_SHARE_MAX)}, CLIENT_CPU_SHARE_MAX)"
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
    if evidence.mode == "poisson" and send.p99 is not None and send.p99 > SEND_LAG_P99_LIMIT_S:
        invalid.append(
            f"sends were late against the schedule: p99 {send.p99 * 1e3:.1f} ms "
            f"> {SEND_LAG_P99_LIMIT_S * 1e3:.0f} ms (SEND_LAG_P99_LIMIT_S)"
        )
    notes = list(evidence.notes)
    late = max(evidence.start_late_s, default=0.0)
    if late > START_LATE_NOTE_S:
        notes.append(f"a worker started {late * 1e3:.0f} ms after the common start instant")
    return invalid, invalid + notes
