"""The endpoint's CloudWatch metrics for each phase of a measurement (GetMetricData).

SageMaker publishes them per minute, a minute or more late. So the recorder notes each phase's
start and end while measuring, and once measuring is done reads every phase's minutes in one
round, again until they have arrived or `--metrics-wait` has passed (0: one read, no waiting):
the wait is paid once, not per phase. A read that fails (no `cloudwatch:GetMetricData`
permission, say) loses no measurement: the figures are null and the note says why.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sagemeter.errors import UserError
from sagemeter.measure.endpoint_metrics import (
    METRICS,
    MINUTE,
    MinuteData,
    arrived,
    judge_phase,
    sent_by_minute,
    used_minutes,
    window_minutes,
)
from sagemeter.measure.sent_log import SentLog
from sagemeter.results.endpoint_metrics import EndpointMetrics, wait_text
from sagemeter.sagemaker.aws import Aws, aws_errors
from sagemeter.sagemaker.spec import VARIANT_NAME

PERIOD_S = 60
POLL_S = 15.0  # CloudWatch's minutes arrive about once a minute; four looks per minute


@dataclass
class PhaseWindow:
    phase: str
    start: datetime
    end: datetime | None = None


def read_minutes(
    client: Any, endpoint: str, variant: str, start: datetime, end: datetime
) -> MinuteData:
    """Sum and SampleCount of every metric, per minute, from `start`'s minute to `end`'s."""
    dimensions = [
        {"Name": "EndpointName", "Value": endpoint},
        {"Name": "VariantName", "Value": variant},
    ]
    queries, ids = [], {}
    for index, spec in enumerate(METRICS):
        for stat in ("Sum", "SampleCount"):
            query_id = f"m{index}{stat.lower()}"
            ids[query_id] = (spec.name, stat)
            queries.append(
                {
                    "Id": query_id,
                    "MetricStat": {
                        "Metric": {
                            "Namespace": spec.namespace,
                            "MetricName": spec.name,
                            "Dimensions": dimensions,
                        },
                        "Period": PERIOD_S,
                        "Stat": stat,
                    },
                    "ReturnData": True,
                }
            )
    sums: dict[tuple[str, datetime], float] = {}
    counts: dict[tuple[str, datetime], float] = {}
    token: str | None = None
    while True:
        page = client.get_metric_data(
            MetricDataQueries=queries,
            StartTime=start,
            EndTime=end,
            ScanBy="TimestampAscending",
            **({"NextToken": token} if token else {}),
        )
        for result in page.get("MetricDataResults", []):
            name, stat = ids[result["Id"]]
            target = sums if stat == "Sum" else counts
            for stamp, value in zip(result["Timestamps"], result["Values"], strict=True):
                target[(name, stamp.astimezone(UTC).replace(second=0, microsecond=0))] = value
        token = page.get("NextToken")
        if not token:
            break
    data: MinuteData = {}
    for (name, minute), value in sums.items():
        data.setdefault(name, {})[minute] = (value, counts.get((name, minute), 0.0))
    return data


def endpoint_variant(aws: Aws, endpoint: str, region: str) -> tuple[str, str | None]:
    """The variant the metrics are kept under, and a note when it had to be assumed or chosen."""
    try:
        with aws_errors(f"describe endpoint {endpoint}", region):
            described = aws.sagemaker(region).describe_endpoint(EndpointName=endpoint)
    except UserError as exc:
        return VARIANT_NAME, f"variant assumed {VARIANT_NAME} (sagemeter's own): {exc}"
    variants = [v["VariantName"] for v in described.get("ProductionVariants") or []]
    if not variants:
        return VARIANT_NAME, f"variant assumed {VARIANT_NAME}: DescribeEndpoint named none"
    note = None
    if len(variants) > 1:
        note = f"the endpoint has {len(variants)} variants; these are {variants[0]}'s metrics only"
    return variants[0], note


class EndpointMetricsRecorder:
    """Notes each phase's window while measuring; reads CloudWatch for all of them at the end."""

    def __init__(
        self,
        endpoint: str,
        region: str,
        wait_s: float,
        log: SentLog,
        *,
        aws: Aws | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.endpoint, self.region, self.wait_s = endpoint, region, wait_s
        self.log = log
        self.aws = aws
        self.sleep = sleep
        self.windows: list[PhaseWindow] = []

    def begin(self, phase: str) -> None:
        self.log.phase = phase
        self.windows.append(PhaseWindow(phase, datetime.now(UTC)))

    def end(self) -> None:
        if self.windows and self.windows[-1].end is None:
            self.windows[-1].end = datetime.now(UTC)
        self.log.phase = "between phases"

    async def read(self) -> EndpointMetrics:
        """Every phase's figures, waiting at most `wait_s` for CloudWatch's minutes."""
        result = EndpointMetrics(endpoint=self.endpoint, region=self.region, wait_s=self.wait_s)
        windows = [w for w in self.windows if w.end is not None]
        if not windows:
            result.notes.append("no phase was measured")
            return result
        try:
            aws = self.aws if self.aws is not None else await asyncio.to_thread(Aws)
            variant, note = await asyncio.to_thread(
                endpoint_variant, aws, self.endpoint, self.region
            )
            client = await asyncio.to_thread(aws.client, "cloudwatch", self.region)
        except UserError as exc:
            result.notes.append(f"not read: {exc}")
            return self._judged(result, windows, {}, f"not read ({exc})")
        result.variant = variant
        if note:
            result.notes.append(note)
        start = min(w.start for w in windows).replace(second=0, microsecond=0)
        last = max(w.end for w in windows if w.end is not None)
        end = last.replace(second=0, microsecond=0) + MINUTE
        began = time.monotonic()
        data: MinuteData = {}
        while True:
            try:
                with aws_errors("read the endpoint's metrics", self.region, "cloudwatch"):
                    data = await asyncio.to_thread(
                        read_minutes, client, self.endpoint, variant, start, end
                    )
            except UserError as exc:
                result.notes.append(f"not read: {exc}")
                result.waited_s = round(time.monotonic() - began, 3)
                return self._judged(result, windows, data, f"not read ({exc})")
            result.reads += 1
            left = self.wait_s - (time.monotonic() - began)
            if self._all_arrived(windows, data) or left <= 0:
                break
            await self.sleep(min(POLL_S, left))
        result.waited_s = round(time.monotonic() - began, 3)
        absent = f"did not arrive within {wait_text(self.wait_s)} (--metrics-wait)"
        return self._judged(result, windows, data, absent)

    def _all_arrived(self, windows: list[PhaseWindow], data: MinuteData) -> bool:
        by_minute = sent_by_minute(self.log.entries)
        for window in windows:
            assert window.end is not None
            minutes, _ = used_minutes(
                window.phase, window_minutes(window.start, window.end), by_minute
            )
            tries = sum(s.tries for m in minutes for s in by_minute.get(m, []))
            if not arrived(data, minutes, tries):
                return False
        return True

    def _judged(
        self, result: EndpointMetrics, windows: list[PhaseWindow], data: MinuteData, absent: str
    ) -> EndpointMetrics:
        for window in windows:
            assert window.end is not None
            result.phases.append(
                judge_phase(window.phase, window.start, window.end, self.log.entries, data, absent)
            )
        return result
