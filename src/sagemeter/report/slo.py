"""The "Cost at your SLO" section: each checkpoint's operating point at the plan's latency target.

Shown when a result holds an operating-point search (a plan's `[slo]` table): the most load that
met every SLO, the output tokens per second there, and what a million tokens cost there, each
against the first checkpoint. A figure that could not be found is "n/a" with its reason.
"""

from __future__ import annotations

from typing import Any

from sagemeter.compare.costs import cost_per_million_tokens
from sagemeter.figures import Declared
from sagemeter.figures.builtin import SLO_CONCURRENCY, SLO_COST, SLO_RATE, SLO_THROUGHPUT
from sagemeter.report.document import (
    Block,
    Cell,
    Figure,
    Paragraph,
    Section,
    Table,
    cell,
    label,
)
from sagemeter.report.figures import NA, num
from sagemeter.report.rows import name_of, ratio_cells, ratio_header
from sagemeter.report.runs import Run
from sagemeter.results import MeasureResult


def _target_text(search: dict[str, Any]) -> str:
    name = f"p{search.get('percentile', 99):g}"
    parts = [
        f"{label_} {name} ≤ {value * 1e3:g} ms"
        for label_, value in (
            ("TTFT", search.get("slo_ttft_s")),
            ("TPOT", search.get("slo_tpot_s")),
        )
        if isinstance(value, int | float)
    ]
    return ", ".join(parts) or "the SLO"


def _cost(result: MeasureResult, price: float | None) -> float | None:
    tps = result.slo_tokens_per_second
    if price is not None and tps:
        return cost_per_million_tokens(price, tps)
    return result.usd_per_million_tokens_at_slo


def slo_section(run: Run) -> Section | None:
    """The section, or None when no result was searched at an SLO."""
    contenders = run.contenders
    searched = [r for r in contenders if r.slo_search is not None]
    if not searched:
        return None
    search = searched[0].slo_search or {}
    by_rate = search.get("search") == "rate"
    compared = {row.key: row for row in run.comparison.rows} if run.comparison else {}
    load_values = [r.slo_rate if by_rate else r.slo_concurrency for r in contenders]
    at = SLO_RATE if by_rate else SLO_CONCURRENCY
    figures: list[tuple[str, Declared, list[float | None]]] = [
        (at.label, at, [None if v is None else float(v) for v in load_values]),
        (
            "Output tokens/s there",
            SLO_THROUGHPUT,
            [r.slo_tokens_per_second for r in contenders],
        ),
        (
            "$ per M output tokens there",
            SLO_COST,
            [_cost(r, run.price_per_hour) for r in contenders],
        ),
    ]
    rows: list[list[Cell]] = []
    for title, figure, values in figures:
        key, money = figure.key, figure.priced_from is not None
        shown = [
            cell(NA if v is None else ("$" if money else "") + num(v, money=money)) for v in values
        ]
        rows.append([label(title), *shown, *ratio_cells(values, compared.get(key))])
    blocks: list[Block] = [
        Paragraph(
            f"The most load each checkpoint served with {_target_text(search)} (`sagemeter "
            "load --search`: doubling, then bisection; every probe in the result's "
            "`slo_search`), and what a million output tokens cost there: price / (tokens/s × "
            "3600) × 10⁶."
        ),
        Table(
            header=["", *(name_of(r) for r in contenders), *ratio_header(contenders)],
            rows=rows,
        ),
    ]
    notes = [f"{name_of(r)}: {r.slo_note}" for r in contenders if r.slo_note]
    if notes:
        blocks.append(Paragraph("Not found: " + "; ".join(notes) + "."))
    blocks.append(
        Figure(
            "slo",
            "Output tokens/s against TTFT at the SLO's percentile: every probe of each "
            "checkpoint's search (filled: met the SLO; hollow: missed; label: the load).",
        )
    )
    return Section("Cost at your SLO", "slo", blocks)
