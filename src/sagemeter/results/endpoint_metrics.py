"""A SageMaker endpoint's own CloudWatch figures per phase, as a result keeps them (the result
schema's): `measure.endpoint_metrics` computes them, `measure.endpoint_metrics_recorder` reads
them from AWS."""

from __future__ import annotations

from pydantic import BaseModel, Field

LATE = {"model_latency_ms", "overhead_latency_ms", "invocations"}


def wait_text(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 and seconds % 60 == 0 else f"{seconds:g} s"


class EndpointPhase(BaseModel):
    """One phase as the endpoint saw it (CloudWatch, per minute) beside the client's view."""

    phase: str
    window_start_utc: str = Field(description="the first whole minute used (UTC)")
    window_end_utc: str = Field(description="the end of the last minute used (UTC)")
    minutes: int = Field(description="minutes the figures come from")
    shared_minutes: int = Field(
        0, description="minutes of the phase left out: they also held another phase's requests"
    )
    model_latency_ms: float | None = Field(None, description="ModelLatency, mean per invocation")
    overhead_latency_ms: float | None = Field(
        None, description="OverheadLatency, mean per invocation: SageMaker's own time"
    )
    invocations: float | None = None
    invocation_4xx_errors: float | None = None
    invocation_5xx_errors: float | None = None
    gpu_utilization_pct: float | None = Field(None, description="mean over the minutes")
    gpu_memory_utilization_pct: float | None = None
    cpu_utilization_pct: float | None = None
    requests_sent: int = Field(description="tries this phase sent in the minutes used")
    other_requests_sent: int = Field(
        0, description="tries of other phases in the same minutes (then the means are mixed)"
    )
    client_latency_ms: float | None = Field(
        None, description="the client's mean time per answered request (send to last byte)"
    )
    client_and_network_ms: float | None = Field(
        None, description="client_latency_ms − model_latency_ms − overhead_latency_ms"
    )
    missing: dict[str, str] = Field(
        default_factory=dict, description="each figure that is null, and why"
    )
    problems: list[str] = Field(default_factory=list, description="counts that disagree")


class EndpointMetrics(BaseModel):
    """The endpoint's CloudWatch metrics per phase of one measurement, or why there are none."""

    endpoint: str
    region: str
    variant: str | None = None
    period_s: int = 60
    wait_s: float = Field(description="--metrics-wait: the longest wait for the minutes")
    waited_s: float = Field(0.0, description="how long the read waited for them")
    reads: int = Field(0, description="GetMetricData rounds made")
    phases: list[EndpointPhase] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def warnings(self) -> list[str]:
        """The problems, and one line naming what did not arrive, for the result's warnings."""
        lines = [*self.notes, *(p for phase in self.phases for p in phase.problems)]
        late = [
            phase.phase
            for phase in self.phases
            if any("did not arrive" in why for key, why in phase.missing.items() if key in LATE)
        ]
        if late:
            lines.append(
                f"endpoint metrics: ModelLatency/Invocations did not arrive within "
                f"{wait_text(self.wait_s)} for {', '.join(late)} (--metrics-wait)"
            )
        return [
            line if line.startswith("endpoint") else f"endpoint metrics: {line}" for line in lines
        ]
