"""The SLO phase's figures in a measure result, and its plot, from results built here.

The search itself runs against the known-truth server in test_operating_point.py and, per arm of a
plan, in test_experiment_slo.py; these check what a result and a report make of its outcome.
"""

from __future__ import annotations

from sagemeter.measure.slo import SloFigures, search_slo
from sagemeter.measure.workflow import with_slo
from sagemeter.options.slo import SloOptions
from sagemeter.report.plots import Series, slo_plot
from sagemeter.results import MeasureResult

PROBES = [
    {"concurrency": 1, "rate": None, "ttft_s": 0.020, "output_tokens_per_second": 130.0,
     "passed": True},
    {"concurrency": 2, "rate": None, "ttft_s": 0.021, "output_tokens_per_second": 262.0,
     "passed": True},
    {"concurrency": 4, "rate": None, "ttft_s": 0.080, "output_tokens_per_second": 266.0,
     "passed": False},
]  # fmt: skip
SEARCH = {"search": "concurrency", "slo_ttft_s": 0.035, "percentile": 90.0, "probes": PROBES}


def test_a_found_point_goes_to_the_top_level_and_keeps_the_result_complete() -> None:
    figures = SloFigures(
        slo_concurrency=2,
        slo_tokens_per_second=262.0,
        usd_per_million_tokens_at_slo=3.82,
        slo_search={**SEARCH, "client_limited": False},
    )
    result = with_slo(MeasureResult(name="a", complete=True), figures)
    assert (result.slo_concurrency, result.slo_tokens_per_second) == (2, 262.0)
    assert result.usd_per_million_tokens_at_slo == 3.82
    assert result.complete is True and not result.incomplete_because
    reread = MeasureResult.model_validate_json(result.model_dump_json())
    assert reread.slo_search is not None and reread.slo_search["probes"][2]["passed"] is False


def test_a_search_that_could_not_run_or_finish_makes_the_result_incomplete() -> None:
    result = with_slo(MeasureResult(name="a", complete=True), search_slo(None, _options(), 1.0))
    assert result.complete is False and result.slo_concurrency is None
    assert result.incomplete_because[0].startswith("slo: not searched: the load generator")
    limited = SloFigures(slo_note="no operating point: the client could not measure 8 at once",
                         slo_search={**SEARCH, "client_limited": True})  # fmt: skip
    assert with_slo(MeasureResult(name="b"), limited).complete is False
    none_met = SloFigures(slo_note="no load met the SLO: even 1 at once misses",
                          slo_search={**SEARCH, "client_limited": False})  # fmt: skip
    assert with_slo(MeasureResult(name="c", complete=True), none_met).complete is True


def test_the_pareto_plot_draws_every_probe_and_only_when_there_are_some() -> None:
    searched = MeasureResult(name="a", slo_search=SEARCH)
    png = slo_plot([Series("a", searched, "#0072B2")])
    assert png is not None and png.startswith(b"\x89PNG") and len(png) > 10_000
    assert slo_plot([Series("b", MeasureResult(name="b"), "#E69F00")]) is None


def _options() -> SloOptions:
    return SloOptions(ttft=0.5)
