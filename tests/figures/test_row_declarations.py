"""Every row `combine` writes is declared once in the figure registry: a figure (its key) or a
level of a family (its key template), so its label, unit, better direction and format come from
there and nowhere else.

The files are the demo run's three results (A, B, A again) given every figure a result can
carry: a prefill rate, long prompts under load, an endpoint's CloudWatch figures per phase (one
phase named with a space, one figure that did not arrive), a plan's predicted decode, the cost at
the SLO, and a price for the cost rows. A row key added by hand in `combine` without a
declaration fails here.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from sagemeter.compare import combine
from sagemeter.figures import figure_named, level_figure_of, level_label, problems, registry
from sagemeter.figures.builtin import CEILING, PREDICTED, QUALITY_CORRECT, SLO_COST
from sagemeter.figures.builtin_levels import (
    ENDPOINT_CLIENT_AND_NETWORK,
    ENDPOINT_GPU_UTILIZATION,
    ENDPOINT_MODEL_LATENCY,
    ENDPOINT_OVERHEAD_LATENCY,
    LOAD_COST,
)
from sagemeter.figures.declaration import family_problem, level_key
from sagemeter.report.document import Table
from sagemeter.report.runs import load_run
from sagemeter.report.speed import aba_section, plugin_level_rows
from sagemeter.report.terminal import figure_label, format_value, print_result
from sagemeter.results import load_result, save_result
from sagemeter.results.endpoint_metrics import EndpointMetrics, EndpointPhase
from sagemeter.results.predicted_decode import PredictedDecode

DEMO_RUN = Path(__file__).resolve().parents[2] / "docs" / "demo-run"
NAMES = ("smollm2-f32", "smollm2-q4_1", "smollm2-f32-again")
PHASES = ("decode", "long prompts")
PRICE = 1.5
ENDPOINT = (
    ENDPOINT_MODEL_LATENCY,
    ENDPOINT_OVERHEAD_LATENCY,
    ENDPOINT_CLIENT_AND_NETWORK,
    ENDPOINT_GPU_UTILIZATION,
)


def _phase(name: str, model_ms: float) -> EndpointPhase:
    return EndpointPhase(
        phase=name,
        window_start_utc="2026-12-03T10:00:00Z",
        window_end_utc="2026-12-03T10:02:00Z",
        minutes=2,
        requests_sent=10,
        model_latency_ms=model_ms,
        client_latency_ms=model_ms + 10.0,
        overhead_latency_ms=4.0,
        client_and_network_ms=6.0,
        gpu_utilization_pct=None,  # did not arrive: a null in its row, not a missing row
        missing={"gpu_utilization_pct": "no GPUUtilization datapoint"},
    )


def _everything(folder: Path) -> list[Path]:
    """The demo run's files, each given every figure a result can carry."""
    paths = []
    for index, name in enumerate(NAMES):
        result = load_result(DEMO_RUN / f"measure-{name}.json")
        assert result.detail is not None and result.detail.environment.checkpoint_facts
        result.prefill_tokens_per_second = 800.0 + index
        result.long_prompt_tokens_per_second = {"2": 60.0 + index}
        result.long_prompt_ttft_p50_ms = {"2": 300.0}
        result.long_prompt_ttft_p90_ms = {"2": 450.0}
        result.detail.endpoint_metrics = EndpointMetrics(
            endpoint="demo",
            region="us-east-2",
            wait_s=0.0,
            phases=[_phase(phase, 100.0 + 10 * index) for phase in PHASES],
        )
        result.detail.environment.predicted_decode = PredictedDecode(
            instance_type="g6e.xlarge", ceiling_tokens_per_second=900.0
        )
        result.detail.environment.server["instance_types"] = ["g6e.xlarge"]
        result.slo_search = {"probes": []}
        result.slo_concurrency = 4
        result.slo_rate = 2.0
        result.slo_tokens_per_second = 120.0 + index
        result.usd_per_million_tokens_at_slo = 3.0
        paths.append(folder / f"measure-{name}.json")
        save_result(result, paths[-1])
    return paths


def test_every_row_combine_writes_is_declared_in_the_registry(tmp_path: Path) -> None:
    comparison = combine(_everything(tmp_path), price_per_hour=PRICE)
    keys = [row.key for row in comparison.rows]
    undeclared = [key for key in keys if figure_named(key) is None and level_figure_of(key) is None]
    assert undeclared == []
    # The rows that were once spelled by hand are all here, so the check above covers them.
    endpoint_keys = [level_key(family, phase) for phase in PHASES for family in ENDPOINT]
    for key in (
        QUALITY_CORRECT.key,
        PREDICTED.key,
        CEILING.key,
        "decode_measured_over_predicted_ceiling",
        "prefill_tokens_per_second",
        "long_prompt_c2_tokens_per_second",
        level_key(LOAD_COST, 16),
        SLO_COST.key,
        *endpoint_keys,
    ):
        assert key in keys, key
    # Each phase's four endpoint rows together, phases in the order the files hold them.
    start = keys.index("endpoint_decode_model_latency_ms")
    assert keys[start : start + 8] == [
        f"endpoint_{phase}_{figure}"
        for phase in PHASES
        for figure in (
            "model_latency_ms",
            "overhead_latency_ms",
            "client_and_network_ms",
            "gpu_utilization_pct",
        )
    ]
    rows = {row.key: row for row in comparison.rows}
    long_model = rows["endpoint_long prompts_model_latency_ms"]
    assert long_model.values == [100.0, 110.0, 120.0]
    assert long_model.ratios == [pytest.approx(1.1), pytest.approx(1.2)]
    assert rows["endpoint_decode_gpu_utilization_pct"].values == [None, None, None]
    # The count's kind and format come from its declaration.
    correct = rows[QUALITY_CORRECT.key]
    assert correct.kind == "count" and correct.ratio_flags == []
    assert format_value(QUALITY_CORRECT.key, 1234.0) == "1,234"
    assert rows[level_key(LOAD_COST, 16)].kind == "cost"
    assert format_value(SLO_COST.key, 3.0) == "3.00"
    # Sizes and predictions do not drift: no flag on their ratios.
    assert rows[PREDICTED.key].ratio_flags == [] and rows["weights_gib"].ratio_flags == []
    assert figure_label(PREDICTED.key, narrow=True) == "predicted tok/s/GB"


def test_a_phase_named_row_names_its_family_and_phase() -> None:
    key = "endpoint_long prompts_client_and_network_ms"
    assert level_figure_of(key) == (ENDPOINT_CLIENT_AND_NETWORK, "long prompts")
    assert level_figure_of("endpoint__model_latency_ms") is None  # no phase: no row
    assert level_label(ENDPOINT_GPU_UTILIZATION, "decode") == (
        "Endpoint, decode: GPU utilization, mean (%)"
    )
    # The built-in families keep the rules a plug-in's must keep.
    for family in ENDPOINT:
        assert family_problem(family, family.name) is None


def test_the_report_titles_every_drift_row_by_its_declaration(tmp_path: Path) -> None:
    """A vs A' in the report: each row of the comparison in words, none by its raw key (the
    endpoint's rows were once shown as `endpoint_decode_model_latency_ms`)."""
    _everything(tmp_path)
    run = load_run(tmp_path)
    assert run.comparison is not None and run.comparison.drift is not None
    tables = [block for block in aba_section(run).blocks if isinstance(block, Table)]
    drift = next(table for table in tables if table.caption.startswith("A vs A"))
    titles = [row[0].text for row in drift.rows]
    keys = [row.key for row in run.comparison.rows]
    assert len(titles) == len(keys)
    assert [title for title in titles if title in keys] == []
    for title in (
        QUALITY_CORRECT.label,
        PREDICTED.label,
        SLO_COST.label,
        level_label(ENDPOINT_MODEL_LATENCY, "long prompts"),
    ):
        assert title in titles, title


PLUGIN = """\
from sagemeter.figures import LevelFigure


def client_mean(result):
    metrics = result.detail.endpoint_metrics if result.detail else None
    return {phase.phase: phase.client_latency_ms for phase in (metrics.phases if metrics else [])}


CLIENT_MEAN = LevelFigure(
    name="endpoint_client_mean_ms",
    key_template="endpoint_{level}_client_mean_ms",
    label_template="Endpoint, {level}: the client's mean (ms)",
    level_name="phase",
    level_unit="a phase of the measurement",
    unit="ms",
    better="lower",
    group="endpoint",
    stored=False,
    read=client_mean,
    named_levels=True,
)
READ_AND_STORED = LevelFigure(
    name="endpoint_stored_ms",
    key_template="endpoint_{level}_stored_ms",
    label_template="Endpoint, {level}: stored (ms)",
    level_name="phase",
    level_unit="a phase of the measurement",
    unit="ms",
    group="endpoint",
    read=client_mean,
    named_levels=True,
)
"""


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A plug-in's distribution on disk: a family read off the result, by phase name, and one
    that says it is both read and stored (refused)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "client_phases.py").write_text(PLUGIN)
    info = site / "client_phases-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: client-phases\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[sagemeter.figures]\nendpoint_client_mean_ms = client_phases:CLIENT_MEAN\n"
        "endpoint_stored_ms = client_phases:READ_AND_STORED\n"
    )
    monkeypatch.syspath_prepend(str(site))
    registry.reset()
    yield site
    monkeypatch.undo()
    registry.reset()


def test_a_plugin_family_read_by_phase_gets_rows_in_combine_the_report_and_the_terminal(
    installed: Path, tmp_path: Path
) -> None:
    assert problems() == [
        "the figure plug-in 'endpoint_stored_ms': a cost family (group cost, priced_from) is not "
        "stored, and every other family is but one read off the result (read); it is left out "
        "(see docs/extending.md)"
    ]
    folder = tmp_path / "run"
    folder.mkdir()
    comparison = combine(_everything(folder))
    keys = [row.key for row in comparison.rows]
    for phase in PHASES:  # after the phase's own four rows, the plug-in's
        start = keys.index(level_key(ENDPOINT_MODEL_LATENCY, phase))
        assert keys[start + 4] == f"endpoint_{phase}_client_mean_ms"
    row = next(r for r in comparison.rows if r.key == "endpoint_long prompts_client_mean_ms")
    assert row.values == [110.0, 120.0, 130.0]  # each file's model latency + 10 ms

    shown = plugin_level_rows(load_run(folder), None)
    titles = [cells[0].text for cells in shown]
    assert titles == [f"Endpoint, {phase}: the client's mean (ms)" for phase in PHASES]

    console = Console(width=200, file=io.StringIO())
    print_result(console, load_result(folder / f"measure-{NAMES[1]}.json"))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    line = next(line for line in text.splitlines() if "long prompts: the client's mean" in line)
    assert line.split("│")[2].strip() == "120", line
