"""The Comparison: two or more results side by side, the article's `combine` table.

Rows are the article's figures; each later file gets a ratio against the first. With a price per
hour, cost per million output tokens at each concurrency. When the first and last files measured
the same checkpoint (A-B-A), the drift between them is reported beside every speed figure, unless
their start times show they did not bracket the others (then `drift_note` says why there is none).
Results that ran on different hardware or server software are warned about (`environments`).

Each file says which method measured it (ours, `sagemeter`, or the source article's, `article`,
be it `--method article` or one of the article's own files). A ratio or verdict between files of
different methods is never shown as a plain difference: it is flagged and the warning says why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from sagemeter.atomic import write_text_atomic
from sagemeter.compare.costs import check_price, cost_per_million_tokens
from sagemeter.compare.environments import busy_hosts, environment_differences
from sagemeter.errors import UserError
from sagemeter.evidence import QualityComparison, QualityVerdict, compare_quality, decide
from sagemeter.evidence.bootstrap import interval, ratio_interval
from sagemeter.evidence.summary import render_summary
from sagemeter.evidence.unpaired import CountsVerdict, decide_from_counts
from sagemeter.evidence.verdict import DEFAULT_MARGIN_POINTS
from sagemeter.fidelity.compare import FidelityComparison, compare_fidelity, summary_lines
from sagemeter.figures import (
    Declared,
    LevelFamily,
    figure_named,
    level_figure_named,
    level_figure_of,
    level_figures,
    level_key,
    level_values,
    stored_levels,
    value_of,
)
from sagemeter.figures import figures as registered_figures
from sagemeter.figures import problems as figure_problems
from sagemeter.figures.builtin import SLO_FIGURES
from sagemeter.measure.figure_samples import speed_samples
from sagemeter.platforms.registry import platform_named
from sagemeter.results import (
    Interval,
    MeasureResult,
    PrecisionStop,
    QualityDetail,
    SequentialStop,
    load_result,
)


class Row(BaseModel):
    key: str
    values: list[float | None]
    ratios: list[float | None] = Field(description="value of file i / value of the first file")
    kind: str = Field("figure", description="figure | speed | cost | count")
    intervals: list[Interval | None] = Field(
        default_factory=list, description="each value's bootstrap 95% interval, where it has one"
    )
    ratio_intervals: list[Interval | None] = Field(
        default_factory=list, description="each ratio's 95% interval, both sides resampled"
    )
    ratio_flags: list[str | None] = Field(
        default_factory=list,
        description="why a ratio says nothing: its interval reaches 1 or the A-A' drift band, "
        "or the two files were measured by different methods",
    )
    # Absent unless set, so rows compared by ratio keep the shape they always had.
    differences: list[float | None] | None = Field(
        None,
        description="value of file i - value of the first file, for a figure declared to be "
        "compared by its difference (its ratios are then null); absent for every other row",
        exclude_if=lambda value: value is None,
    )


class FigureDrift(BaseModel):
    key: str
    first: float | None
    last: float | None
    change: float | None = Field(description="(last - first) / first")


class Drift(BaseModel):
    """A vs A': the same checkpoint measured first and last; the noise floor of every ratio."""

    first: str
    last: str
    relative_change: dict[str, float | None] = Field(description="the speed figures only")
    max_abs_relative_change: float | None = Field(description="largest speed-figure drift")
    identical_answers: str | None = None
    figures: list[FigureDrift] = Field(
        default_factory=list, description="the drift of every row of the comparison"
    )


class QualityCheck(BaseModel):
    """A candidate's answers against the reference's (the first file), with the verdict."""

    reference: str
    candidate: str
    margin_points: float
    verdict: str = Field(description="PASS | FAIL | INCONCLUSIVE")
    across_methods: str | None = Field(
        None,
        description="set when the two files were measured by different methods (e.g. "
        "'sagemeter vs article'): the verdict is then not about the checkpoints alone",
    )
    paired: QualityComparison | None = Field(
        None, description="question by question, when both files hold their answers"
    )
    paired_verdict: QualityVerdict | None = None
    counts_verdict: CountsVerdict | None = Field(
        None, description="from the counts alone, when a file holds no per-question answers"
    )
    summary: list[str] = Field(description="the verdict as the CLI prints it")
    sequential: SequentialStop | None = Field(
        None,
        description="set when the run asked in blocks and stopped at a sequential look "
        '([stop] quality = "decided"): the verdict is then that look\'s',
    )


class FidelityCheck(BaseModel):
    """A candidate's next-token distributions against the reference's, forced along its answers."""

    reference: str
    candidate: str
    comparison: FidelityComparison
    summary: list[str]


class Comparison(BaseModel):
    names: list[str]
    files: list[str]
    methods: list[str | None] = Field(
        default_factory=list,
        description="each file's method (sagemeter | article), None when the file does not say",
    )
    price_per_hour: float | None = None
    rows: list[Row]
    identical_answers: str | None = Field(
        None, description="answers identical character for character, first vs second file"
    )
    drift: Drift | None = None
    drift_note: str | None = Field(
        None,
        description="why there is no A-A' drift though the first and last files are the same "
        "checkpoint: their start times show they did not bracket the others (e.g. A measured "
        "again on resume after B)",
    )
    time_order: list[str] | None = Field(
        None,
        description="the files' names in the order they were measured, when a run's journal "
        "knew it (it decides the A-A' drift; start times have whole seconds)",
    )
    quality_checks: list[QualityCheck] = Field(
        default_factory=list, description="each candidate's answers against the first file's"
    )
    fidelity_checks: list[FidelityCheck] = Field(
        default_factory=list,
        description="token-level fidelity against the first file, where the files hold records",
    )
    incomplete: list[str | None] = Field(
        default_factory=list,
        description="per file, in file order: what a result that says `complete: false` is "
        "missing (None: complete, or the file does not say)",
    )
    quality_not_compared: list[str] = Field(
        default_factory=list,
        description="why a candidate has no quality verdict though both files asked (e.g. no "
        "question was answered by both: one server died); its speed rows still stand",
    )
    warnings: list[str] = Field(default_factory=list)
    decode_precision: list[PrecisionStop | None] = Field(
        default_factory=list,
        description="per file, in file order: how decode's repeats ended under a precision "
        "target ([stop] speed, --speed-precision), None without one",
    )
    order: str | None = Field(
        None,
        description="the order `sagemeter run` measured the files in: ABA, ABAB, … or "
        "interleaved (every arm live at once, requests alternated); None from `combine`",
    )
    order_note: str | None = Field(
        None,
        description="set by `sagemeter run` when the time order differed from the plan's "
        "(a result measured again on resume): the planned order and the measured one",
    )


def _ratio(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base == 0:
        return None
    return value / base


def incomplete_note(name: str, result: MeasureResult) -> str | None:
    """One line for a result that says `complete: false`: its name and each missing figure with
    why, so no face shows it as if it were whole; None for any other result."""
    if result.complete is not False:
        return None
    missing = "; ".join(result.incomplete_because) or "the file does not say which figure"
    return f"{name} is incomplete, a figure it asked for is missing: {missing}"


def method_of(result: MeasureResult) -> str | None:
    """Which method measured a result: its settings say; a file without settings does not."""
    if result.detail is None:
        return None
    return str(result.detail.settings.get("method", "sagemeter"))


def methods_differ(a: str | None, b: str | None) -> bool:
    """Only two known, different methods differ; an unknown one is said elsewhere."""
    return a is not None and b is not None and a != b


def _row(key: str, values: list[float | None], kind: str) -> Row:
    base = values[0]
    return Row(key=key, values=values, ratios=[_ratio(v, base) for v in values[1:]], kind=kind)


def _levels(results: list[MeasureResult], families: list[LevelFamily]) -> list[str]:
    """Every level some file holds a figure of `families` at, in order: by number, or, for
    levels that are names (phases), in the order the files hold them."""
    levels: dict[str, None] = {}
    for result in results:
        for family in families:
            levels.update(dict.fromkeys(level_values(result, family)))
    if any(getattr(family, "named_levels", False) for family in families):
        return list(levels)
    return sorted(levels, key=int)


def identical_answers(a: MeasureResult, b: MeasureResult) -> str | None:
    """'n/total' of items whose replies match exactly, when both files hold replies."""
    if not (a.detail and a.detail.quality and b.detail and b.detail.quality):
        return None
    replies_b = {item.id: item.reply for item in b.detail.quality.items if item.answered}
    shared = [item for item in a.detail.quality.items if item.answered and item.id in replies_b]
    if not shared:
        return None
    same = sum(1 for item in shared if item.reply is not None and item.reply == replies_b[item.id])
    return f"{same}/{len(shared)}"


def _same_checkpoint(a: MeasureResult, b: MeasureResult) -> bool:
    if not (a.detail and b.detail):
        return False
    env_a, env_b = a.detail.environment, b.detail.environment
    if env_a.checkpoint_sha256 and env_b.checkpoint_sha256:
        return env_a.checkpoint_sha256 == env_b.checkpoint_sha256
    return env_a.target == env_b.target and env_a.model == env_b.model


def speed_figures(result: MeasureResult) -> dict[str, float | None]:
    figures: dict[str, float | None] = {}
    for figure in registered_figures():
        value = value_of(result, figure)
        if figure.speed and figure.stored and _shown(figure.group, [result], [value]):
            figures[figure.key] = value
    for family in level_figures():
        if family.speed and family.stored:
            for level, value in stored_levels(result, family).items():
                figures[level_key(family, level)] = value
    return figures


def drift_between(a: MeasureResult, b: MeasureResult, rows: list[Row]) -> Drift:
    """A vs A' on every row; the speed figures A holds are the ones that judge the ratios."""
    figures = [_figure_drift(row) for row in rows]
    by_key = {figure.key: figure.change for figure in figures}
    changes = {key: by_key.get(key) for key in speed_figures(a)}
    known = [abs(change) for change in changes.values() if change is not None]
    return Drift(
        first=a.name or "first",
        last=b.name or "last",
        relative_change=changes,
        max_abs_relative_change=max(known) if known else None,
        identical_answers=identical_answers(a, b),
        figures=figures,
    )


def _check_comparable(paths: list[Path], results: list[MeasureResult]) -> list[str]:
    """Refuse files that cannot be compared; return warnings for differences that may matter."""
    sets = {
        path: result.detail.quality.question_set_sha256
        for path, result in zip(paths, results, strict=True)
        if result.detail and result.detail.quality
    }
    if len(set(sets.values())) > 1:
        first = next(iter(sets))
        other = next(path for path, digest in sets.items() if digest != sets[first])
        raise UserError(
            f"{other}: asked a different question set than {first}; answers cannot be compared"
        )
    totals = {
        path: asked
        for path, result in zip(paths, results, strict=True)
        if (asked := result.questions_asked()) is not None
    }
    if len(set(totals.values())) > 1:
        first_path, first_total = next(iter(totals.items()))
        odd = next(path for path, total in totals.items() if total != first_total)
        raise UserError(f"{odd}: quality has a different number of questions than {first_path}")
    warnings = _asked_differently(paths, results)
    warnings.extend(environment_differences(paths, results))
    warnings.extend(busy_hosts(paths, results))
    methods = [method_of(result) for result in results]
    if len({method for method in methods if method is not None}) > 1:
        listed = ", ".join(
            f"{path.name} {method}" for path, method in zip(paths, methods, strict=True) if method
        )
        warnings.append(
            f"the files were measured by different methods ({listed}): a difference between "
            "them may be the method's, not the checkpoint's; such ratios and verdicts are marked"
        )
    settings = [result.detail.settings for result in results if result.detail]
    if len(settings) == len(results) and any(s != settings[0] for s in settings[1:]):
        warnings.append("the files were measured with different settings; read ratios with care")
    return warnings


def _asked_differently(paths: list[Path], results: list[MeasureResult]) -> list[str]:
    """Answers compare only when every file asked the same way: say which setting differs."""
    asked = {
        path: result.detail.quality
        for path, result in zip(paths, results, strict=True)
        if result.detail and result.detail.quality
    }
    if len(asked) < 2:
        return []
    first_path, first = next(iter(asked.items()))
    warnings = []
    for path, quality in list(asked.items())[1:]:
        for field in ("max_tokens", "temperature", "seed", "scoring", "system_prompt"):
            if getattr(quality, field) != getattr(first, field):
                warnings.append(f"{path.name}: quality {field} differs from {first_path.name}")
        templates = (first.chat_template_sha256, quality.chat_template_sha256)
        if all(templates) and templates[0] != templates[1]:
            warnings.append(
                f"{path.name}: the server's chat template differs from {first_path.name}"
            )
    return warnings


def combine(
    paths: list[Path],
    *,
    price_per_hour: float | None = None,
    margin_points: float | None = None,
    time_order: Sequence[str] | None = None,
) -> Comparison:
    """Load every file (each problem is one UserError naming the file) and build the table.
    `time_order` (the files' names in the order they were measured, as a run's journal knows
    it) decides whether A and A' bracket the others; without it their start times do (whole
    seconds, so two files begun in one second cannot be told apart by them)."""
    if len(paths) < 2:
        raise UserError("combine needs at least two result files")
    check_price(price_per_hour)
    results = [load_result(path) for path in paths]
    names = [r.name or path.stem for r, path in zip(results, paths, strict=True)]
    incomplete = [incomplete_note(name, r) for name, r in zip(names, results, strict=True)]
    warnings = [note for note in incomplete if note is not None]
    warnings += _check_comparable(paths, results)
    if price_per_hour is None:
        price_per_hour, price_warnings = recorded_price(paths, results)
        warnings.extend(price_warnings)
    warnings.extend(figure_problems())
    rows = [
        *figure_rows(results, "startup"),
        *figure_rows(results, "decode"),
        *figure_rows(results, "predicted"),
        *figure_rows(results, "ceiling"),
        *figure_rows(results, "call"),
        *figure_rows(results, "streaming"),
        *figure_rows(results, "prefill"),
    ]
    rows.extend(level_rows(results, "load"))
    rows.extend(level_rows(results, "long_prompt"))
    rows.extend(figure_rows(results, "more"))
    rows.extend(figure_rows(results, "quality"))
    rows.extend(level_rows(results, "endpoint"))
    if price_per_hour is not None:
        rows.extend(level_rows(results, "cost", price_per_hour))
    rows.extend(_slo_rows(results, price_per_hour))
    drift, drift_note = None, None
    if len(results) >= 3 and _same_checkpoint(results[0], results[-1]):
        drift_note = not_bracketing(names, results, time_order)
        if drift_note is None:
            drift = drift_between(results[0], results[-1], rows)
        else:
            warnings.append(drift_note)
    methods = [method_of(result) for result in results]
    _add_intervals(rows, results, drift, methods)
    for result, path in zip(results, paths, strict=True):
        if result.detail:
            warnings.extend(f"{path.name}: {warning}" for warning in result.detail.warnings)
    margin = margin_points if margin_points is not None else _declared_margin(results[0])
    candidates = results[1:-1] if drift is not None else results[1:]
    a_again = results[-1] if drift is not None else None
    checks, not_compared = [], []
    floor = a_again
    if a_again is not None and (why := no_shared_answer(results[0], a_again)) is not None:
        floor = None  # no A-A' noise floor: the verdicts stand on A and B alone
        warnings.append(f"quality: no A-A' noise floor ({why})")
    for candidate in candidates:
        why = no_shared_answer(results[0], candidate)
        if why is not None:
            not_compared.append(why)
            warnings.append(f"quality not compared: {why}")
            continue
        check = quality_check(results[0], candidate, floor, margin)
        if check is not None:
            checks.append(across_methods(check, method_of(results[0]), method_of(candidate)))
    fidelity_checks, fidelity_warnings = _fidelity_checks(results, candidates, a_again)
    warnings.extend(fidelity_warnings)
    return Comparison(
        names=names,
        files=[str(path) for path in paths],
        methods=methods,
        price_per_hour=price_per_hour,
        rows=rows,
        identical_answers=identical_answers(results[0], results[1]),
        drift=drift,
        drift_note=drift_note,
        time_order=list(time_order) if time_order is not None else None,
        quality_checks=checks,
        fidelity_checks=fidelity_checks,
        incomplete=incomplete,
        quality_not_compared=not_compared,
        warnings=warnings,
        decode_precision=[
            r.detail.decode.precision if r.detail and r.detail.decode else None for r in results
        ],
    )


def not_bracketing(
    names: list[str], results: list[MeasureResult], time_order: Sequence[str] | None = None
) -> str | None:
    """Why A and A' give no drift across the run: another file was measured before A or after
    A' (so A and A' ran back to back), by `time_order` when known, else by the start times;
    None when neither says so (or a file has no start time)."""
    if time_order is not None and sorted(time_order) == sorted(names):
        if time_order[0] == names[0] and time_order[-1] == names[-1]:
            return None
        return _not_bracketing_note(names, list(time_order))
    starts = [r.detail.environment.started_utc if r.detail else None for r in results]
    try:
        parsed = [datetime.fromisoformat(s.replace("Z", "+00:00")) for s in starts if s]
    except ValueError:
        return None
    times = [t if t.tzinfo else t.replace(tzinfo=UTC) for t in parsed]  # a bare time is UTC
    if len(times) != len(results):
        return None
    first, last = times[0], times[-1]
    if all(t >= first for t in times[1:]) and all(t <= last for t in times[:-1]):
        return None
    order = [name for _, name in sorted(zip(times, names, strict=True), key=lambda p: p[0])]
    return _not_bracketing_note(names, order)


def _not_bracketing_note(names: list[str], order: list[str]) -> str:
    return (
        f"no A-A' drift: {names[0]} and {names[-1]} were not measured first and last (in time: "
        f"{', '.join(order)}), so their difference is not the drift across the run"
    )


def no_shared_answer(a: MeasureResult, b: MeasureResult) -> str | None:
    """Why two files' answers cannot be paired at all (no question answered by both, e.g. a
    server died before the quality phase), or None when they can be (or hold no answers)."""
    answers_a = a.detail.quality if a.detail else None
    answers_b = b.detail.quality if b.detail else None
    if answers_a is None or answers_b is None:
        return None
    answered = {item.id for item in answers_a.items if item.answered}
    if any(item.answered and item.id in answered for item in answers_b.items):
        return None
    names = (a.name or "A", b.name or "B")
    silent = [
        name
        for name, answers in zip(names, (answers_a, answers_b), strict=True)
        if not any(item.answered for item in answers.items)
    ]
    who = f"{' and '.join(silent)} answered no question" if silent else "no question in common"
    return f"no question was answered by both {names[0]} and {names[1]} ({who})"


def recorded_price(
    paths: list[Path], results: list[MeasureResult]
) -> tuple[float | None, list[str]]:
    """Without --price-per-hour: the hourly price results measured on a platform's endpoint
    recorded at deploy (that of the instance type placed), when they agree; else None and why
    there are no cost rows.

    A result is a platform's when its backend names an installed platform (SageMaker's
    `sagemaker`); results of engines and plain servers record no price, and for them nothing is
    said, as before.
    """
    recorded = [
        (path.name, r.detail.environment.server)
        for path, r in zip(paths, results, strict=True)
        if r.detail is not None and platform_named(r.detail.environment.backend) is not None
    ]
    if not recorded:
        return None, []
    if len(recorded) < len(results):
        kinds = sorted({r.detail.environment.backend for r in results if r.detail is not None})
        return None, [
            f"no cost rows: only some files are results of a platform's endpoint "
            f"({', '.join(kinds)}); pass --price-per-hour"
        ]
    missing = [
        f"{name}: {server.get('price_note') or 'no price recorded'}"
        for name, server in recorded
        if not isinstance(server.get("hourly_usd"), int | float)
    ]
    if missing:
        return None, [f"no cost rows: pass --price-per-hour ({'; '.join(missing)})"]
    prices = {(float(s["hourly_usd"]), s.get("priced_instance_type")) for _, s in recorded}
    if len(prices) > 1:
        shown = ", ".join(f"${usd:g}/h ({kind or '?'})" for usd, kind in sorted(prices, key=str))
        return None, [f"no cost rows: the results were priced differently ({shown}); pass "
                      "--price-per-hour"]  # fmt: skip
    [(usd, kind)] = prices
    server = recorded[0][1]
    return usd, [
        f"cost rows at ${usd:g} per instance-hour, recorded at deploy for {kind or '?'} "
        f"({server.get('price_note') or 'AWS Price List'}); --price-per-hour overrides it"
    ]


def _figure_drift(row: Row) -> FigureDrift:
    first, last = row.values[0], row.values[-1]
    change = (last - first) / first if first and last is not None else None
    return FigureDrift(key=row.key, first=first, last=last, change=change)


def _add_intervals(
    rows: list[Row],
    results: list[MeasureResult],
    drift: Drift | None,
    methods: list[str | None],
) -> None:
    """Intervals for every value and ratio that has raw repeats, and a flag on each ratio that
    cannot be told from no change: its interval (or the ratio itself, without one) reaches 1 or
    the A-A' drift band of that figure, or its two files were measured by different methods."""
    samples = [speed_samples(result) for result in results]
    figures = drift.figures if drift else []
    bands = {figure.key: abs(figure.change) for figure in figures if figure.change is not None}
    by_key = {row.key: row for row in rows}
    for row in rows:
        if (priced := _priced_from(row.key)) is not None:
            _cost_intervals(row, by_key.get(priced))
        else:
            row.intervals = [interval(found.get(row.key)) for found in samples]
            base = samples[0].get(row.key)
            row.ratio_intervals = [
                ratio_interval(base, found.get(row.key)) for found in samples[1:]
            ]
        if row.kind == "count" or not getattr(figure_named(row.key), "drifts", True):
            continue  # sizes and predictions do not drift; counts get the quality verdict
        last_is_a_again = drift is not None
        row.ratio_flags = [
            None
            if last_is_a_again and index == len(row.ratios) - 1
            else _ratio_flag(ratio, row.ratio_intervals[index], bands.get(row.key))
            or _method_flag(ratio, methods[0], methods[index + 1])
            for index, ratio in enumerate(row.ratios)
        ]


def _method_flag(ratio: float | None, first: str | None, other: str | None) -> str | None:
    if ratio is None or not methods_differ(first, other):
        return None
    return f"measured by different methods ({first} vs {other})"


def _priced_from(key: str) -> str | None:
    """The throughput row a level's cost row is priced from (its intervals are that row's)."""
    found = level_figure_of(key)
    priced = getattr(found[0], "priced_from", None) if found is not None else None
    throughput = level_figure_named(priced) if priced is not None else None
    return level_key(throughput, found[1]) if found is not None and throughput else None


def _cost_intervals(cost: Row, throughput: Row | None) -> None:
    """Cost is price / throughput: its intervals are the throughput's, inverted and swapped."""
    if throughput is None:
        return
    cost.intervals = [
        _inverted(bounds, value, tps)
        for bounds, value, tps in zip(
            throughput.intervals, cost.values, throughput.values, strict=True
        )
    ]
    cost.ratio_intervals = [_inverted(bounds, 1.0, 1.0) for bounds in throughput.ratio_intervals]


def _inverted(bounds: Interval | None, value: float | None, tps: float | None) -> Interval | None:
    """The interval of value * tps / x for x in `bounds` (x > 0)."""
    if bounds is None or value is None or tps is None:
        return None
    scale = value * tps
    low = scale / bounds.high if bounds.high else None
    high = scale / bounds.low if bounds.low else None
    return bounds.model_copy(update={"low": low if low is not None else 0.0, "high": high})


def _ratio_flag(ratio: float | None, bounds: Interval | None, band: float | None) -> str | None:
    if ratio is None:
        return None
    if bounds is None:
        low = high = ratio
    else:
        low = bounds.low if bounds.low is not None else 0.0
        high = bounds.high if bounds.high is not None else math.inf
    if band and low <= 1.0 + band and high >= 1.0 - band:
        return f"within the A-A' drift (±{band:.1%})"
    if low <= 1.0 <= high:
        return "interval includes 1" if bounds else "no change (ratio 1)"
    return None


def _fidelity_checks(
    results: list[MeasureResult],
    candidates: list[MeasureResult],
    a_again: MeasureResult | None,
) -> tuple[list[FidelityCheck], list[str]]:
    """Each candidate forced along the first file's answers, with A' as the floor when forced."""
    reference = results[0].detail.fidelity if results[0].detail else None
    if reference is None:
        return [], []
    floor = a_again.detail.fidelity if a_again is not None and a_again.detail else None
    checks, warnings = [], []
    for candidate in candidates:
        record = candidate.detail.fidelity if candidate.detail else None
        if record is None:
            continue
        try:
            found = compare_fidelity(reference, record, floor if floor and floor.forced else None)
        except UserError as exc:
            warnings.append(f"fidelity of {candidate.name}: not compared ({exc})")
            continue
        checks.append(
            FidelityCheck(
                reference=results[0].name or "A",
                candidate=candidate.name or "B",
                comparison=found,
                summary=summary_lines(found),
            )
        )
    return checks, warnings


def _declared_margin(result: MeasureResult) -> float:
    """The margin the reference run declared before it ran (its settings), else the default."""
    declared = result.detail.settings.get("margin_points") if result.detail else None
    return float(declared) if isinstance(declared, int | float) else DEFAULT_MARGIN_POINTS


def quality_check(
    reference: MeasureResult,
    candidate: MeasureResult,
    reference_again: MeasureResult | None,
    margin_points: float,
) -> QualityCheck | None:
    """Paired when both files hold their answers, from the counts otherwise; None without both."""
    names = (reference.name or "A", candidate.name or "B")
    answers_a = reference.detail.quality if reference.detail else None
    answers_b = candidate.detail.quality if candidate.detail else None
    if answers_a is not None and answers_b is not None:
        again = (
            reference_again.detail.quality if reference_again and reference_again.detail else None
        )
        paired = compare_quality(answers_a, answers_b, a_again=again)
        verdict = decide(paired, margin_points=margin_points)
        sequential = shared_sequential(answers_a, answers_b, margin_points)
        summary = []
        if sequential is not None:
            # The look's verdict, at its level: the fixed 95% rule on questions chosen by a
            # stopping rule would not keep its error rates.
            update = {"verdict": sequential.verdict, "reason": sequential.stopping_reason}
            verdict = verdict.model_copy(update=update)
            summary.append(
                f"sequential: {sequential.sentence} (looks {sequential.looks_taken} of "
                f"{sequential.looks_planned}, nominal false PASS "
                f"{sequential.nominal_false_pass:.1%}, false FAIL "
                f"{sequential.nominal_false_fail:.1%}; {sequential.method})"
            )
        return QualityCheck(
            reference=names[0],
            candidate=names[1],
            margin_points=margin_points,
            verdict=verdict.verdict,
            paired=paired,
            paired_verdict=verdict,
            summary=[*summary, *render_summary(paired, verdict, names).splitlines()],
            sequential=sequential,
        )
    counts_a, counts_b = reference.quality_counts(), candidate.quality_counts()
    if counts_a is None or counts_b is None or not counts_a[1] or not counts_b[1]:
        return None
    counts = decide_from_counts(*counts_a, *counts_b, margin_points=margin_points)
    return QualityCheck(
        reference=names[0],
        candidate=names[1],
        margin_points=margin_points,
        verdict=counts.verdict,
        counts_verdict=counts,
        summary=counts_summary(names, counts_a, counts_b, counts),
    )


def shared_sequential(
    a: QualityDetail, b: QualityDetail, margin_points: float
) -> SequentialStop | None:
    """The sequential record both results hold, when it decided between these two at this
    margin (another margin given to `combine` is judged by the fixed-count rule)."""
    record = a.sequential
    if record is None or record != b.sequential or record.margin_points != margin_points:
        return None
    return record


def across_methods(
    check: QualityCheck, reference: str | None, candidate: str | None
) -> QualityCheck:
    """A verdict between two methods carries them: asked or scored differently, a flip may be
    the method's (another reply cap, seed or scoring rule), not the checkpoint's."""
    if not methods_differ(reference, candidate):
        return check
    return check.model_copy(update={"across_methods": f"{reference} vs {candidate}"})


def across_methods_note(check: QualityCheck) -> str | None:
    """The sentence every face prints beside a verdict across methods."""
    if check.across_methods is None:
        return None
    return (
        f"across methods ({check.across_methods}): {check.verdict} compares answers asked and "
        "scored by different methods, so it is not about the checkpoints alone"
    )


def counts_summary(
    names: tuple[str, str], counts_a: tuple[int, int], counts_b: tuple[int, int], v: CountsVerdict
) -> list[str]:
    a, b = names
    return [
        f"quality from counts only ({a} {counts_a[0]}/{counts_a[1]}, {b} {counts_b[0]}/"
        f"{counts_b[1]}): the files hold no per-question answers, so the runs are not paired",
        f"  verdict at a {v.margin_points:g}-point margin: {v.verdict}: {v.reason}",
        f"  detectable drop at this count (80% power): {v.detectable_drop_points:.1f} points; "
        f"to decide at the margin: about {v.items_needed:,} questions per run "
        "(fewer when paired: keep the answers)",
    ]


def figure_rows(results: list[MeasureResult], group: str) -> list[Row]:
    """The rows of the declared figures of `group` (figures.registry), where the group is shown:
    the startup, decode and call figures always; the streaming ones when a file has a decode
    phase; the prefill ones when a file ran that phase; the others where a file has a value."""
    declared = registered_figures([group])
    found = [[value_of(result, figure) for result in results] for figure in declared]
    rows = []
    for figure, values in zip(declared, found, strict=True):
        if not _shown(group, results, values, found):
            continue
        row = _row(figure.key, values, _kind(figure))
        if figure.compared != "ratio":
            row.ratios = [None] * len(row.ratios)
        if figure.compared == "difference":
            row.differences = [_difference(value, values[0]) for value in values[1:]]
        rows.append(row)
    return rows


def _difference(value: float | None, base: float | None) -> float | None:
    return None if value is None or base is None else value - base


def _shown(
    group: str,
    results: list[MeasureResult],
    values: list[float | None],
    group_values: list[list[float | None]] | None = None,
) -> bool:
    """Whether a figure's row is shown: by its group's rule (`Group` in figures.declaration),
    from the row's own values or, for the groups shown together, every row's of the group."""
    if group in ("predicted", "ceiling"):
        return any(value is not None for row in group_values or [values] for value in row)
    if group == "streaming":
        return any(r.detail and r.detail.decode for r in results)
    if group == "prefill":
        return any(_has_prefill(r) for r in results)
    if group == "more":
        return any(value is not None for value in values)
    return True  # startup, decode, call, quality


def _has_prefill(result: MeasureResult) -> bool:
    """The file ran the prefill phase (older files and the article's have no such phase)."""
    ran = result.detail is not None and result.detail.prefill is not None
    return ran or result.prefill_tokens_per_second is not None


def level_rows(
    results: list[MeasureResult], group: str, price_per_hour: float | None = None
) -> list[Row]:
    """The rows of the level families of `group` (figures.registry) that some file holds: for
    each level some file holds (in order), one row per family (in declaration order), null for
    a file without that level. A cost family is priced from its throughput family at the
    comparison's price."""
    families, measured = [], []
    for family in level_figures([group]):
        source = _measured_family(family)
        if any(level_values(result, source) for result in results):
            families.append(family)
            measured.append(source)
    rows = []
    for level in _levels(results, measured):
        for family, source in zip(families, measured, strict=True):
            values = [level_values(result, source).get(level) for result in results]
            if source is not family:
                values = [_cost(price_per_hour, tps) for tps in values]
            row = _row(level_key(family, level), values, _kind(family))
            if family.compared != "ratio":
                row.ratios = [None] * len(row.ratios)
            if family.compared == "difference":
                row.differences = [_difference(value, values[0]) for value in values[1:]]
            rows.append(row)
    return rows


def _measured_family(family: LevelFamily) -> LevelFamily:
    """The family whose values the results hold: a cost family's throughput family."""
    priced = getattr(family, "priced_from", None)
    return (level_figure_named(priced) or family) if priced is not None else family


def _kind(figure: object) -> str:
    if getattr(figure, "priced_from", None) is not None:
        return "cost"
    if getattr(figure, "counted", False):
        return "count"
    return "speed" if getattr(figure, "speed", False) else "figure"


def _cost(price_per_hour: float | None, tps: float | None) -> float | None:
    return cost_per_million_tokens(price_per_hour, tps) if price_per_hour and tps else None


def _slo_rows(results: list[MeasureResult], price_per_hour: float | None) -> list[Row]:
    """The cost at the SLO (a plan's [slo] table): the operating point, its throughput and its
    $/M tokens, when any file has them. The cost is from the comparison's price when it has one
    (as every cost row is), else the one each file recorded."""
    if not any(r.slo_search is not None for r in results):
        return []
    rows = []
    by_key = {figure.key: figure for figure in SLO_FIGURES}
    for figure in SLO_FIGURES:
        values = [figure.read(result) if figure.read else None for result in results]
        if figure.priced_from is not None:  # the cost row: always shown
            throughput = by_key[figure.priced_from]
            costs = slo_costs(results, price_per_hour, figure, throughput)
            rows.append(_row(figure.key, costs, "cost"))
        elif any(value is not None for value in values):
            rows.append(_row(figure.key, values, _kind(figure)))
    return rows


def slo_costs(
    results: list[MeasureResult], price_per_hour: float | None, cost: Declared, throughput: Declared
) -> list[float | None]:
    """The cost at the SLO: from the comparison's price when it has one (as every cost row
    is), else the one each file recorded."""
    costs: list[float | None] = []
    for result in results:
        tps = throughput.read(result) if throughput.read else None
        if price_per_hour is not None and tps:
            costs.append(cost_per_million_tokens(price_per_hour, tps))
        else:
            costs.append(cost.read(result) if cost.read else None)
    return costs


def save_comparison(comparison: Comparison, path: Path) -> None:
    # `combine` writes no order (that is `sagemeter run`'s)
    unordered = {"order", "order_note"} if comparison.order is None else None
    write_text_atomic(path, comparison.model_dump_json(indent=2, exclude=unordered) + "\n")
