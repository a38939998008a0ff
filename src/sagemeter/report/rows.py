"""Building blocks every report section shares: names, levels, ratio columns, figure rows."""

from __future__ import annotations

from collections.abc import Sequence

from sagemeter.compare import Row, incomplete_note
from sagemeter.report.document import (
    Cell,
    cell,
    label,
)
from sagemeter.report.figures import (
    NA,
    interval_span,
    num,
    pick_best,
    ratio,
    spread_note,
)
from sagemeter.report.runs import Run
from sagemeter.results import LoadLevel, MeasureResult, Spread

MINIMAL_NOTE = (
    "hold the article's minimal keys only (no `detail`): engine, hardware, dates, raw timings "
    "and every spread are n/a for them."
)
COST_CAVEAT = (
    "The endpoint bills while it exists, busy or idle, so these figures hold only while it is "
    "kept busy."
)


def name_of(result: MeasureResult) -> str:
    return result.name or "unnamed"


def incomplete_notes(run: Run) -> list[str]:
    """Each result of the run that says `complete: false`, named with what it is missing (the
    comparison's own lines when there is one, so the report and `combine` say the same)."""
    if run.comparison is not None and run.comparison.incomplete:
        return [note for note in run.comparison.incomplete if note is not None]
    return [note for r in run.results if (note := incomplete_note(name_of(r), r)) is not None]


def method_label(result: MeasureResult) -> str:
    """Which method measured a file, said the way a reader checks it: ours, the article's run
    by sagemeter, or the article's own result file."""
    if result.detail is None:
        return f"{NA} (the file does not record its settings)"
    if result.detail.source_format == "article":
        return "article (the article's own result file)"
    method = str(result.detail.settings.get("method", "sagemeter"))
    return "article (sagemeter --method article)" if method == "article" else method


def scoring_text(rule: str) -> str:
    """How a scoring rule is named in prose."""
    return "strictly" if rule == "strict" else f"by the {rule}'s rule (a match anywhere)"


def levels_of(results: list[MeasureResult]) -> list[str]:
    levels: set[str] = set()
    for result in results:
        levels.update(result.load_tokens_per_second)
    return sorted(levels, key=int)


def level_detail(result: MeasureResult, level: str) -> LoadLevel | None:
    if result.detail is None or result.detail.load is None:
        return None
    return next((lv for lv in result.detail.load.levels if str(lv.concurrency) == level), None)


def batch_spread(result: MeasureResult, level: str) -> Spread | None:
    found = level_detail(result, level)
    return found.batch_rates if found else None


def incomplete_of(run: Run) -> list[bool]:
    """Which contenders said `complete: false`: none of their figures is ever crowned."""
    return [result.complete is False for result in run.contenders]


def noise_of(run: Run) -> float | None:
    drift = run.comparison.drift if run.comparison else None
    return drift.max_abs_relative_change if drift else None


def ratio_header(results: list[MeasureResult]) -> list[str]:
    base = name_of(results[0])
    return [f"{name_of(r)} / {base}" for r in results[1:]]


def ratio_cells(values: list[float | None], compared: Row | None = None) -> list[Cell]:
    """Each ratio against the first; with the comparison's row, its interval and flag as a note."""
    cells = []
    for index, value in enumerate(values[1:]):
        note = ""
        if compared is not None and index < len(compared.ratio_intervals):
            bounds = compared.ratio_intervals[index]
            if bounds is not None:
                note = f"95%: {interval_span(bounds)}"
            flag = compared.ratio_flags[index] if index < len(compared.ratio_flags) else None
            if flag:
                note = f"{note}; {flag}" if note else flag
        cells.append(cell(ratio(value, values[0]), note))
    return cells


def comparison_row(run: Run, key: str) -> Row | None:
    """The comparison's row for `key` (its ratio intervals and flags), when the run has one."""
    rows = run.comparison.rows if run.comparison else []
    return next((row for row in rows if row.key == key), None)


def interval_note(result: MeasureResult, key: str) -> str:
    """`95% a–b; repeats min–max` from the result's `intervals`, or nothing without them."""
    summary = result.intervals.get(key)
    if summary is None or summary.ci95 is None:
        return ""
    note = f"95%: {interval_span(summary.ci95, num)}"
    if summary.min is not None and summary.max is not None:
        note += f"; {summary.repeats} repeats {num(summary.min)}–{num(summary.max)}"
    return note


def figure_row(
    title: str,
    values: list[float | None],
    notes: list[str] | None = None,
    *,
    higher: bool | None = None,
    noise: float | None = None,
    incomplete: Sequence[bool] = (),
    money: bool = False,
    scale: float = 1.0,
    with_ratio: bool = True,
    compared: Row | None = None,
) -> list[Cell]:
    """One row: a label, each result's figure (winner marked when `higher` is set), ratios."""
    marks = [False] * len(values)
    if higher is not None:
        marks, _ = pick_best(values, higher=higher, noise=noise, incomplete=incomplete)
    notes = notes or [""] * len(values)
    row = [label(title)]
    row += [
        cell(num(value, scale=scale, money=money), note, best=mark)
        for value, note, mark in zip(values, notes, marks, strict=True)
    ]
    if with_ratio:
        row += ratio_cells(values, compared)
    return row


def latency_note(spread: Spread | None) -> str:
    return spread_note(spread, scale=1000, tails=True)


def batches_note(result: MeasureResult, level: str) -> str:
    spread = batch_spread(result, level)
    return f"batches: {spread_note(spread)}" if spread else f"spread {NA}"
