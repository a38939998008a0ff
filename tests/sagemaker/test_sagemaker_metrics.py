"""A SageMaker endpoint's own CloudWatch metrics per phase, beside the client's figures.

moto's CloudWatch (server mode, loopback) holds what SageMaker would publish: per minute,
ModelLatency and OverheadLatency in microseconds (Sum and SampleCount over the invocations),
Invocations, the 4XX/5XX counts, and the instance's utilisation. The measure test puts them for
the minutes the runtime fake saw requests in, and reads them back through `measure_target`.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.measure.endpoint_metrics_recorder import EndpointMetricsRecorder, PhaseWindow
from sagemeter.measure.sent_log import Sent, SentLog
from sagemeter.measure.workflow import measure_target
from sagemeter.results import load_result
from sagemeter.settings import quick_settings
from sagemeter.targets import parse_target
from tests.sagemaker_fakes import RuntimeFake, World, plain_endpoint

REGION = "us-east-2"
MODEL_US, OVERHEAD_US = 120_000.0, 5_000.0  # 120 ms and 5 ms per invocation
GPU, GPU_MEMORY, CPU = 87.5, 60.0, 12.5


@pytest.fixture(scope="module")
def runtime_fake() -> Iterator[RuntimeFake]:
    """The loopback runtime in front of a known-truth server rather than the embedded engine:
    these tests are about what reaches SageMaker and back, and the truth server answers in
    milliseconds (the real engine behind the runtime is tested in test_sagemaker_measure.py)."""
    with running_truth_server(TruthTiming(ttft_s=0.02, itl_s=0.004, prefill_s=50e-6)) as url:
        fake = RuntimeFake(url + "/v1")
        yield fake
        fake.close()


def _dimensions(endpoint: str, variant: str) -> list[dict[str, str]]:
    return [
        {"Name": "EndpointName", "Value": endpoint},
        {"Name": "VariantName", "Value": variant},
    ]


def put_minute(
    endpoint: str,
    variant: str,
    minute: datetime,
    invocations: int,
    *,
    model_us: float = MODEL_US,
    utilisation: bool = True,
) -> None:
    """One minute as SageMaker publishes it: latency as statistics over the invocations."""
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    stamp = minute + timedelta(seconds=1)
    dims = _dimensions(endpoint, variant)

    def stats(per: float) -> dict[str, float]:
        return {
            "SampleCount": invocations,
            "Sum": per * invocations,
            "Minimum": per,
            "Maximum": per,
        }

    cloudwatch.put_metric_data(
        Namespace="AWS/SageMaker",
        MetricData=[
            {
                "MetricName": "ModelLatency",
                "Dimensions": dims,
                "Timestamp": stamp,
                "StatisticValues": stats(model_us),
                "Unit": "Microseconds",
            },
            {
                "MetricName": "OverheadLatency",
                "Dimensions": dims,
                "Timestamp": stamp,
                "StatisticValues": stats(OVERHEAD_US),
                "Unit": "Microseconds",
            },
            {
                "MetricName": "Invocations",
                "Dimensions": dims,
                "Timestamp": stamp,
                "Value": invocations,
                "Unit": "None",
            },
            {
                "MetricName": "Invocation4XXErrors",
                "Dimensions": dims,
                "Timestamp": stamp,
                "Value": 0,
                "Unit": "None",
            },
            {
                "MetricName": "Invocation5XXErrors",
                "Dimensions": dims,
                "Timestamp": stamp,
                "Value": 0,
                "Unit": "None",
            },
        ],
    )
    if utilisation:
        cloudwatch.put_metric_data(
            Namespace="/aws/sagemaker/Endpoints",
            MetricData=[
                {
                    "MetricName": name,
                    "Dimensions": dims,
                    "Timestamp": stamp,
                    "Value": value,
                    "Unit": "Percent",
                }
                for name, value in (
                    ("GPUUtilization", GPU),
                    ("GPUMemoryUtilization", GPU_MEMORY),
                    ("CPUUtilization", CPU),
                )
            ],
        )


def _minute(at: float) -> datetime:
    return datetime.fromtimestamp(at, UTC).replace(second=0, microsecond=0)


@pytest.mark.slow  # a whole measurement through the runtime fake
def test_measure_reads_the_endpoint_metrics_of_each_phase_beside_the_clients(
    world: World, runtime: RuntimeFake, tmp_path: Path
) -> None:
    """What SageMaker published for the minutes its runtime saw requests in comes back per phase,
    microseconds as milliseconds, under the variant DescribeEndpoint names; another endpoint's
    minutes are not mixed in; the counts agree, so no problem is named."""
    plain_endpoint("metered", REGION)  # its variant is "v"
    runtime.placed["metered"] = REGION
    phases: list[str] = []

    def publish(phase: str) -> None:
        phases.append(phase)
        if phase.startswith("endpoint metrics"):
            counts = Counter(_minute(r["at"]) for r in runtime.requests if r["name"] == "metered")
            for minute, count in counts.items():
                put_minute("metered", "v", minute, count)
                put_minute("someone-else", "v", minute, count + 7, model_us=9e6)

    settings = quick_settings().model_copy(
        update={"metrics_wait_s": 30.0, "load_levels": [2], "questions_per_family": 1}
    )
    result, path = asyncio.run(
        measure_target(
            parse_target(f"metered@{REGION}"),
            name="metered",
            settings=settings,
            out_dir=tmp_path,
            on_phase=publish,
        )
    )
    assert "endpoint metrics (CloudWatch, up to 30 s)" in phases
    metrics = load_result(path).detail.endpoint_metrics  # type: ignore[union-attr]
    assert metrics is not None and metrics == result.detail.endpoint_metrics  # type: ignore[union-attr]
    assert (metrics.endpoint, metrics.region, metrics.variant) == ("metered", REGION, "v")
    assert metrics.reads == 1  # everything was there at the first read: no waiting
    assert [p.phase for p in metrics.phases] == ["decode", "parallel", "quality"]
    # Every request the runtime saw is counted once, in one phase's minutes or another's.
    assert sum(p.invocations or 0 for p in metrics.phases if p.other_requests_sent == 0) <= len(
        runtime.requests
    )
    for phase in metrics.phases:
        assert phase.model_latency_ms == 120.0 and phase.overhead_latency_ms == 5.0
        assert (phase.invocation_4xx_errors, phase.invocation_5xx_errors) == (0, 0)
        assert (phase.gpu_utilization_pct, phase.gpu_memory_utilization_pct) == (GPU, GPU_MEMORY)
        assert phase.cpu_utilization_pct == CPU
        assert phase.invocations == phase.requests_sent + phase.other_requests_sent
        assert phase.requests_sent > 0 and phase.problems == []
        assert phase.client_latency_ms is not None and phase.client_latency_ms > 0
        if phase.client_and_network_ms is None:
            assert "also held other phases' requests" in phase.missing["client_and_network_ms"]
        else:
            assert phase.client_and_network_ms == pytest.approx(
                phase.client_latency_ms - 125.0, abs=0.002
            )
    assert not any(w.startswith("endpoint metrics") for w in result.detail.warnings)  # type: ignore[union-attr]
    # The quality phase's minutes hold at least its own questions.
    quality = metrics.phases[-1]
    assert quality.requests_sent >= len(result.detail.quality.items)  # type: ignore[union-attr]


def _recorder(log: SentLog, wait_s: float, windows: list[PhaseWindow]) -> EndpointMetricsRecorder:
    recorder = EndpointMetricsRecorder("metered", REGION, wait_s, log)
    recorder.windows = windows
    return recorder


def _phase_log(base: datetime) -> tuple[SentLog, list[PhaseWindow]]:
    """Three phases in minutes of their own, 20 minutes ago: a (4 requests of 200 ms), b (3),
    and c, whose minute SageMaker never publishes."""
    log = SentLog()
    windows = []
    for offset, phase, count in ((0, "a", 4), (3, "b", 3), (6, "c", 2)):
        start = base + timedelta(minutes=offset, seconds=5)
        for i in range(count):
            log.entries.append(Sent(phase, start.timestamp() + i, 1, True, 0.2))
        windows.append(PhaseWindow(phase, start, start + timedelta(seconds=40)))
    return log, windows


def test_the_split_a_mismatch_and_minutes_that_did_not_arrive(world: World) -> None:
    """client and network = 200 − 120 − 5 ms where the counts agree; a count CloudWatch got
    wrong is named and leaves no split; a minute never published is null with why, after
    waiting --metrics-wait (2 s here, read again), and 0 s reads once and does not wait."""
    plain_endpoint("metered", REGION)
    base = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=20)
    log, windows = _phase_log(base)
    put_minute("metered", "v", base, 4)
    put_minute("metered", "v", base + timedelta(minutes=3), 5, utilisation=False)  # 3 were sent

    started = time.monotonic()
    metrics = asyncio.run(_recorder(log, 2.0, windows).read())
    assert time.monotonic() - started >= 2.0
    assert metrics.reads >= 2 and metrics.waited_s >= 2.0
    a, b, c = metrics.phases
    assert (a.model_latency_ms, a.overhead_latency_ms, a.client_latency_ms) == (120.0, 5.0, 200.0)
    assert a.client_and_network_ms == 75.0 and a.problems == [] and a.invocations == 4
    assert b.invocations == 5 and b.client_and_network_ms is None
    assert b.problems == [
        f"b: CloudWatch counted 5 invocations in {base + timedelta(minutes=3):%H:%M}–"
        f"{base + timedelta(minutes=4):%H:%M} UTC, the client sent 3 requests (tries) in those "
        "minutes"
    ]
    assert "differs from the requests sent" in b.missing["client_and_network_ms"]
    assert b.gpu_utilization_pct is None
    assert b.missing["gpu_utilization_pct"].endswith(
        "did not arrive within 2 s (--metrics-wait); an instance without a GPU publishes none"
    )
    assert c.model_latency_ms is None and c.invocations is None and c.client_and_network_ms is None
    assert "did not arrive within 2 s (--metrics-wait)" in c.missing["model_latency_ms"]
    assert any("ModelLatency/Invocations did not arrive within 2 s for c" in w
               for w in metrics.warnings())  # fmt: skip
    assert any(
        w.startswith("endpoint metrics: b: CloudWatch counted 5") for w in metrics.warnings()
    )

    started = time.monotonic()
    once = asyncio.run(_recorder(log, 0.0, windows).read())
    assert once.reads == 1 and once.waited_s < 1.0 and time.monotonic() - started < 10.0
    assert "did not arrive within 0 s (--metrics-wait)" in once.phases[2].missing["invocations"]
    assert once.phases[0].client_and_network_ms == 75.0


def test_a_failed_read_loses_no_figure_of_the_measurement_and_says_why(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CloudWatch cannot be read (here nothing listens where its endpoint URL points; a missing
    cloudwatch:GetMetricData is handled the same way): null figures and AWS's reason, never a
    number and never an exception out of the measurement."""
    plain_endpoint("metered", REGION)
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", "http://127.0.0.1:9")
    base = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=20)
    log, windows = _phase_log(base)
    metrics = asyncio.run(_recorder(log, 0.0, windows).read())
    assert metrics.reads == 0
    assert metrics.notes and metrics.notes[0].startswith("not read: cannot reach AWS")
    assert all(p.model_latency_ms is None for p in metrics.phases)
    assert "not read (cannot reach AWS" in metrics.phases[0].missing["model_latency_ms"]


def test_metrics_wait_is_an_option_of_measure_and_plans() -> None:
    """`--metrics-wait 3m` and a plan's `metrics_wait = "90s"` reach the settings; 3 minutes by
    default, none with --quick (a bad value is in test_bad_input.py)."""
    from sagemeter.cli.measure import _settings
    from sagemeter.experiment.plan import MeasureOptions

    defaults: dict[str, Any] = dict.fromkeys(
        ["short_tokens", "long_tokens", "repeats", "levels", "load_tokens", "batches",
         "questions", "quality_max_tokens"]
    )  # fmt: skip
    assert _settings(False, **defaults).metrics_wait_s == 180.0
    assert _settings(True, **defaults).metrics_wait_s == 0.0
    assert _settings(False, **defaults, metrics_wait="3m").metrics_wait_s == 180.0
    assert _settings(True, **defaults, metrics_wait="45s").metrics_wait_s == 45.0
    assert MeasureOptions(metrics_wait="90s").settings().metrics_wait_s == 90.0  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="metrics_wait"):
        MeasureOptions(metrics_wait="soon")  # type: ignore[arg-type]


def test_combine_and_the_report_show_the_endpoint_figures_per_phase(
    world: World, tmp_path: Path
) -> None:
    """Figures read from moto, put in two result files: `combine` has a row per phase and
    figure (null where a phase's minutes never arrived), the report a section with the table,
    the count CloudWatch got wrong and each null's reason."""
    from sagemeter.compare import combine
    from sagemeter.report.markdown import render_markdown
    from sagemeter.report.runs import load_run
    from sagemeter.report.sections import build_document
    from sagemeter.results import save_result

    plain_endpoint("metered", REGION)
    base = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=20)
    log, windows = _phase_log(base)
    put_minute("metered", "v", base, 4)
    put_minute("metered", "v", base + timedelta(minutes=3), 5, utilisation=False)
    metrics = asyncio.run(_recorder(log, 0.0, windows).read())
    source = Path(__file__).parents[1] / "data" / "report-run"
    paths = []
    for name in ("smollm2-f32", "smollm2-q4_1"):
        result = load_result(source / f"measure-{name}.json")
        assert result.detail is not None
        result.detail.endpoint_metrics = metrics
        paths.append(tmp_path / f"measure-{name}.json")
        save_result(result, paths[-1])

    rows = {row.key: row for row in combine(paths).rows}
    assert rows["endpoint_a_model_latency_ms"].values == [120.0, 120.0]
    assert rows["endpoint_a_overhead_latency_ms"].values == [5.0, 5.0]
    assert rows["endpoint_a_client_and_network_ms"].values == [75.0, 75.0]
    assert rows["endpoint_a_gpu_utilization_pct"].values == [GPU, GPU]
    assert rows["endpoint_b_client_and_network_ms"].values == [None, None]
    assert rows["endpoint_c_model_latency_ms"].values == [None, None]

    document = build_document(load_run(tmp_path))
    section = next(s for s in document.sections if s.anchor == "endpoint-metrics")
    text = render_markdown(document, {})
    assert "SageMaker endpoint metrics (CloudWatch)" in text
    assert "b: CloudWatch counted 5 invocations" in text
    assert "c, model_latency_ms: no ModelLatency datapoint" in text
    tables = [block for block in section.blocks if hasattr(block, "rows")]
    first = tables[0].rows[0]  # type: ignore[attr-defined]
    assert [c.text for c in first[:6]] == ["a", "200", "120", "5", "75", "4 / 4"]

    from rich.console import Console

    from sagemeter.report.terminal import print_result

    console = Console(record=True, width=200)
    print_result(console, load_result(paths[0]))
    shown = console.export_text()
    assert (
        "endpoint a: model / overhead / client+network ms │ 120.0 / 5.0 / 75.0 (GPU 88%)" in shown
    )
    assert "endpoint b: model / overhead / client+network ms │ 120.0 / 5.0 / -" in shown
    assert "endpoint c: model / overhead / client+network ms │ - / - / -" in shown


def test_phases_that_share_their_only_minute_say_their_figures_are_mixed(world: World) -> None:
    """Two phases inside one minute: both get that minute's figures, each says how many of the
    other's requests are in them, and neither gets a split (the means are not its own)."""
    plain_endpoint("metered", REGION)
    minute = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=30)
    log, windows = SentLog(), []
    for phase, second, count in (("d", 5, 2), ("e", 30, 3)):
        start = minute + timedelta(seconds=second)
        for i in range(count):
            log.entries.append(Sent(phase, start.timestamp() + i, 1, True, 0.2))
        windows.append(PhaseWindow(phase, start, start + timedelta(seconds=10)))
    put_minute("metered", "v", minute, 5)
    d, e = asyncio.run(_recorder(log, 0.0, windows).read()).phases
    assert (d.requests_sent, d.other_requests_sent) == (2, 3)
    assert (e.requests_sent, e.other_requests_sent) == (3, 2)
    for phase in (d, e):
        assert phase.model_latency_ms == 120.0 and phase.invocations == 5 and not phase.problems
        assert phase.client_and_network_ms is None
        assert "also held other phases' requests (" in phase.missing["client_and_network_ms"]


@pytest.mark.slow  # a whole prefill phase timed against the truth: about 7 s
@pytest.mark.alone
def test_the_prefill_phase_runs_through_the_runtime_and_reads_the_truth(
    world: World, runtime: RuntimeFake, tmp_path: Path
) -> None:
    """A SageMaker arm measures prefill like any other phase: through InvokeEndpoint's stream,
    its prompt lengths the container's own count, and the rate the server's 50 µs per prompt
    token (20,000 tokens/s) within 3%, at seven points a length.

    The runtime fake keeps one connection to the truth server and writes with TCP_NODELAY: a new
    connection (and httpx client) per request added 18-44 ms that varied by request, and Nagle's
    algorithm held a short prompt's first token for the client's delayed ACK (+10 ms, 22,300/s).
    """
    plain_endpoint("prefilled", REGION)
    runtime.placed["prefilled"] = REGION
    truth_stats = runtime.engine_url.removesuffix("/v1") + "/stats"
    connections_before = httpx.get(truth_stats).json()["connections"]
    settings = quick_settings().model_copy(
        update={
            "prefill_tokens": [256, 2048],
            "decode_repeats": 7,
            "load_levels": [1],
            "metrics_wait_s": 0.0,
        }
    )
    result, _path = asyncio.run(
        measure_target(
            parse_target(f"prefilled@{REGION}"),
            name="prefilled",
            settings=settings,
            out_dir=tmp_path,
        )
    )
    prefill = result.detail.prefill  # type: ignore[union-attr]
    assert prefill is not None and prefill.valid, prefill.problems if prefill else None
    assert prefill.short_prompt_tokens == [256] * len(prefill.short_prompt_tokens)
    assert prefill.long_prompt_tokens == [2048] * len(prefill.long_prompt_tokens)
    assert result.prefill_tokens_per_second == pytest.approx(20_000, rel=0.03)
    assert {request["name"] for request in runtime.requests} == {"prefilled"}
    # The container's connections were kept alive (2 opened for 41 requests; one each before).
    opened = httpx.get(truth_stats).json()["connections"] - connections_before
    assert opened < len(runtime.requests) / 2, (opened, len(runtime.requests))
