"""A SageMaker endpoint's own CloudWatch figures for one phase, beside the client's.

SageMaker publishes per minute: `ModelLatency` and `OverheadLatency` (microseconds, per
invocation), `Invocations`, `Invocation4XXErrors`, `Invocation5XXErrors`, and the instance's
`GPUUtilization`, `GPUMemoryUtilization`, `CPUUtilization` (percent). A phase's figures come
from the minutes that held only its own requests (phases meet inside minutes); where no such
minute exists they come from all its minutes and say so. The invocation count is checked against
the tries the client sent in those minutes, and "client and network" (the client's mean time per
request − model − overhead) is given only where both sides counted the same requests.
Nothing here talks to AWS (see endpoint_metrics_recorder.py); every figure missing is null with why.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sagemeter.measure.sent_log import Sent
from sagemeter.results.endpoint_metrics import EndpointPhase

MINUTE = timedelta(minutes=1)


@dataclass(frozen=True)
class MetricSpec:
    """One CloudWatch metric: its namespace and name, and the result field it fills."""

    key: str
    namespace: str
    name: str
    scale: float = 1.0  # ModelLatency and OverheadLatency: µs → ms
    total: bool = False  # a count (the sum over the minutes), not a mean per sample


INVOCATION_NAMESPACE = "AWS/SageMaker"
INSTANCE_NAMESPACE = "/aws/sagemaker/Endpoints"
METRICS = (
    MetricSpec("model_latency_ms", INVOCATION_NAMESPACE, "ModelLatency", scale=1e-3),
    MetricSpec("overhead_latency_ms", INVOCATION_NAMESPACE, "OverheadLatency", scale=1e-3),
    MetricSpec("invocations", INVOCATION_NAMESPACE, "Invocations", total=True),
    MetricSpec("invocation_4xx_errors", INVOCATION_NAMESPACE, "Invocation4XXErrors", total=True),
    MetricSpec("invocation_5xx_errors", INVOCATION_NAMESPACE, "Invocation5XXErrors", total=True),
    MetricSpec("gpu_utilization_pct", INSTANCE_NAMESPACE, "GPUUtilization"),
    MetricSpec("gpu_memory_utilization_pct", INSTANCE_NAMESPACE, "GPUMemoryUtilization"),
    MetricSpec("cpu_utilization_pct", INSTANCE_NAMESPACE, "CPUUtilization"),
)
SPLIT_KEY = "client_and_network_ms"

# metric name → minute start (UTC) → (Sum, SampleCount) of that minute
MinuteData = dict[str, dict[datetime, tuple[float, float]]]


def minute_of(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


def window_minutes(start: datetime, end: datetime) -> list[datetime]:
    """Every UTC minute from the one `start` falls in to the one `end` falls in."""
    first, last = minute_of(start), minute_of(end)
    count = int((last - first) / MINUTE) + 1
    return [first + i * MINUTE for i in range(count)]


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _hhmm(minutes: list[datetime]) -> str:
    return f"{minutes[0]:%H:%M}–{minutes[-1] + MINUTE:%H:%M} UTC"


def sent_by_minute(entries: list[Sent]) -> dict[datetime, list[Sent]]:
    found: dict[datetime, list[Sent]] = {}
    for entry in entries:
        found.setdefault(minute_of(datetime.fromtimestamp(entry.at, UTC)), []).append(entry)
    return found


def used_minutes(
    phase: str, minutes: list[datetime], by_minute: dict[datetime, list[Sent]]
) -> tuple[list[datetime], bool]:
    """The phase's minutes that held only its own requests (and at least one of them); when
    there are none, all its minutes, and True: the figures are mixed with other phases'."""
    own = [
        minute
        for minute in minutes
        if all(s.phase == phase for s in by_minute.get(minute, []))
        and any(s.phase == phase for s in by_minute.get(minute, []))
    ]
    return (own, False) if own else (minutes, True)


def arrived(data: MinuteData, minutes: list[datetime], tries: int) -> bool:
    """The minutes' latency is there and CloudWatch counted at least the tries sent in them."""
    latency = data.get("ModelLatency", {})
    invocations = sum(data.get("Invocations", {}).get(m, (0.0, 0.0))[0] for m in minutes)
    return any(m in latency for m in minutes) and invocations >= tries


def judge_phase(
    phase: str,
    start: datetime,
    end: datetime,
    log: list[Sent],
    data: MinuteData,
    absent: str,
) -> EndpointPhase:
    """The phase's figures from CloudWatch's minutes; `absent` says why a metric with no
    datapoint in them is null (it did not arrive within the wait, or the read failed)."""
    by_minute = sent_by_minute(log)
    all_minutes = window_minutes(start, end)
    minutes, mixed = used_minutes(phase, all_minutes, by_minute)
    sent = [s for m in minutes for s in by_minute.get(m, [])]
    own = [s for s in sent if s.phase == phase]
    found = EndpointPhase(
        phase=phase,
        window_start_utc=_stamp(minutes[0]),
        window_end_utc=_stamp(minutes[-1] + MINUTE),
        minutes=len(minutes),
        shared_minutes=0 if mixed else len(all_minutes) - len(minutes),
        requests_sent=sum(s.tries for s in own),
        other_requests_sent=sum(s.tries for s in sent if s.phase != phase),
    )
    for spec in METRICS:
        points = [data.get(spec.name, {}).get(m) for m in minutes]
        known = [p for p in points if p is not None]
        if not known:
            hint = "; an instance without a GPU publishes none" if "GPU" in spec.name else ""
            found.missing[spec.key] = (
                f"no {spec.name} datapoint for {_hhmm(minutes)}: {absent}{hint}"
            )
            continue
        total, samples = sum(p[0] for p in known), sum(p[1] for p in known)
        value = total if spec.total else (total / samples if samples else None)
        if value is None:
            found.missing[spec.key] = f"{spec.name} has no samples in {_hhmm(minutes)}"
            continue
        setattr(found, spec.key, round(value * spec.scale, 3))
    _check_counts(found, sent, minutes)
    _split(found, own, mixed)
    return found


def _check_counts(found: EndpointPhase, sent: list[Sent], minutes: list[datetime]) -> None:
    """CloudWatch's count against the tries the client sent in the same minutes, and its
    errors against the client's failed tries."""
    tries = sum(s.tries for s in sent)
    if found.invocations is not None and found.invocations != tries:
        found.problems.append(
            f"{found.phase}: CloudWatch counted {found.invocations:,.0f} invocations in "
            f"{_hhmm(minutes)}, the client sent {tries:,} requests (tries) in those minutes"
        )
    failed = sum(s.tries - (1 if s.ok else 0) for s in sent)
    errors = (found.invocation_4xx_errors or 0.0) + (found.invocation_5xx_errors or 0.0)
    if errors and errors != failed:
        found.problems.append(
            f"{found.phase}: CloudWatch counted {errors:,.0f} 4XX/5XX errors in "
            f"{_hhmm(minutes)}, the client saw {failed:,} failed tries"
        )


def _split(found: EndpointPhase, own: list[Sent], mixed: bool) -> None:
    """client and network = the client's mean − model − overhead, when both sides counted the
    same requests; else null and why."""
    latencies = [s.latency_s for s in own if s.latency_s is not None]
    found.client_latency_ms = (
        round(sum(latencies) / len(latencies) * 1000.0, 3) if latencies else None
    )
    why = None
    if found.client_latency_ms is None:
        why = "no answered request of this phase with a timing in the minutes used"
    elif found.model_latency_ms is None or found.overhead_latency_ms is None:
        why = "ModelLatency or OverheadLatency missing (see their reasons)"
    elif mixed:
        why = (
            f"every minute of the phase also held other phases' requests "
            f"({found.other_requests_sent} tries): CloudWatch's means are not this phase's alone"
        )
    elif found.invocations != found.requests_sent:
        why = "CloudWatch's count differs from the requests sent (see problems)"
    elif any(s.tries > 1 or not s.ok for s in own):
        why = "retried or failed tries: CloudWatch's means hold tries the client's mean does not"
    if why is not None:
        found.missing[SPLIT_KEY] = why
        return
    assert found.client_latency_ms is not None
    assert found.model_latency_ms is not None and found.overhead_latency_ms is not None
    found.client_and_network_ms = round(
        found.client_latency_ms - found.model_latency_ms - found.overhead_latency_ms, 3
    )
