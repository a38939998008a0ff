"""When did the client, not the server, set the pace? The rules every wire run is judged by.

Each rule compares one self-awareness figure of the worker processes with a named threshold; a
rule that fires means the figures of that run may hold the client's own delays. The load
generator adds its own rules (achieved concurrency, send lag) on top of these.
"""

from __future__ import annotations

from collections.abc import Sequence

# The client's event loop woke up this late (p99) for its 10 ms lag sampler: every timestamp
# taken on that loop may be as late, a large share of a typical 4–50 ms inter-token gap.
LOOP_LAG_P99_LIMIT_S = 0.010
# One worker process used this share of a core over its run: it was saturated.
WORKER_CPU_SHARE_MAX = 0.90
# All client processes together used this share of the cores they could run on.
CLIENT_CPU_SHARE_MAX = 0.90


def pct(share: float) -> str:
    return f"{share * 100:.0f}%"


def client_limits(
    loop_lag_p99_s: float | None, worker_cpu_shares: Sequence[float], client_cpu_share: float
) -> list[str]:
    """The reasons (one line each) the client may have been the bottleneck; empty if none."""
    reasons: list[str] = []
    if loop_lag_p99_s is not None and loop_lag_p99_s > LOOP_LAG_P99_LIMIT_S:
        reasons.append(
            f"client event-loop lag p99 {loop_lag_p99_s * 1e3:.1f} ms > "
            f"{LOOP_LAG_P99_LIMIT_S * 1e3:.0f} ms (LOOP_LAG_P99_LIMIT_S): the client could not "
            "keep up; add --workers or cores"
        )
    for worker, share in enumerate(worker_cpu_shares):
        if share > WORKER_CPU_SHARE_MAX:
            reasons.append(
                f"worker {worker} used {pct(share)} of a core (> {pct(WORKER_CPU_SHARE_MAX)}, "
                "WORKER_CPU_SHARE_MAX): it was saturated"
            )
    if client_cpu_share > CLIENT_CPU_SHARE_MAX:
        reasons.append(
            f"the client used {pct(client_cpu_share)} of the cores "
            f"(> {pct(CLIENT_CPU_SHARE_MAX)}, CLIENT_CPU_SHARE_MAX)"
        )
    return reasons
