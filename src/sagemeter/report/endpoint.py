"""The report's SageMaker section: where a request's time went, by the endpoint's own account.

Renders only: every figure and reason is in the result files (measure/endpoint_metrics.py).
Absent when no file is a SageMaker result with endpoint metrics, so other reports keep the
article's sections.
"""

from __future__ import annotations

from sagemeter.report.document import (
    Block,
    Bullets,
    Callout,
    Cell,
    Paragraph,
    Section,
    Table,
    cell,
)
from sagemeter.report.figures import NA, num
from sagemeter.report.rows import name_of
from sagemeter.report.runs import Run
from sagemeter.results.endpoint_metrics import EndpointMetrics, EndpointPhase

TITLE, ANCHOR = "SageMaker endpoint metrics (CloudWatch)", "endpoint-metrics"
HEADER = [
    "Phase",
    "Client, mean (ms)",
    "Model (ms)",
    "SageMaker overhead (ms)",
    "Client and network (ms)",
    "Invocations / sent",
    "4XX / 5XX",
    "GPU %",
    "GPU memory %",
    "CPU %",
]


def endpoint_section(run: Run) -> Section | None:
    found = [
        (name_of(r), r.detail.endpoint_metrics)
        for r in run.results
        if r.detail and r.detail.endpoint_metrics
    ]
    if not found:
        return None
    blocks: list[Block] = [
        Paragraph(
            "What the endpoint published to CloudWatch for each phase, beside the client's "
            "own time per request (send to last byte). Model is `ModelLatency` (the container's "
            "time), SageMaker overhead is `OverheadLatency` (SageMaker's own time on the "
            "request), both means per invocation; client and network is the client's mean − "
            "model − overhead, given only where CloudWatch and the client counted the same "
            "requests. CloudWatch keeps whole minutes: a phase's figures come from the minutes "
            "that held only its requests."
        )
    ]
    for name, metrics in found:
        blocks.extend(_blocks(name, metrics))
    return Section(TITLE, ANCHOR, blocks)


def _blocks(name: str, metrics: EndpointMetrics) -> list[Block]:
    where = f"{metrics.endpoint} in {metrics.region}, variant {metrics.variant or NA}"
    blocks: list[Block] = [
        Paragraph(
            f"{name} ({where}; waited {num(metrics.waited_s)} s of at most "
            f"{num(metrics.wait_s)} s for the minutes)."
        )
    ]
    blocks += [Callout(f"{name}: {note}") for note in metrics.notes]
    blocks += [Callout(f"{name}: {problem}") for p in metrics.phases for problem in p.problems]
    if metrics.phases:
        blocks.append(Table(header=HEADER, rows=[_row(p) for p in metrics.phases]))
    missing = [f"{p.phase}, {key}: {why}" for p in metrics.phases for key, why in p.missing.items()]
    if missing:
        blocks.append(Bullets(missing))
    return blocks


def _row(phase: EndpointPhase) -> list[Cell]:
    window = f"{phase.window_start_utc[11:16]}–{phase.window_end_utc[11:16]} UTC"
    if phase.other_requests_sent:
        window += f", mixed with {phase.other_requests_sent} other requests"
    sent = phase.requests_sent + phase.other_requests_sent
    counts = f"{num(phase.invocations)} / {sent}"
    errors = f"{num(phase.invocation_4xx_errors)} / {num(phase.invocation_5xx_errors)}"
    return [
        Cell(text=phase.phase, note=window),
        cell(num(phase.client_latency_ms)),
        cell(num(phase.model_latency_ms)),
        cell(num(phase.overhead_latency_ms)),
        cell(num(phase.client_and_network_ms)),
        cell(counts),
        cell(errors),
        cell(num(phase.gpu_utilization_pct)),
        cell(num(phase.gpu_memory_utilization_pct)),
        cell(num(phase.cpu_utilization_pct)),
    ]
