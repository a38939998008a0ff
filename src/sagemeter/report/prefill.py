"""The report's prompt-processing section: the prefill rate, the first token at each prompt
length, and what the prefix cache did to the same long prompt sent twice.

Renders only: every figure and interval is in the result files (measure/prefill.py).
"""

from __future__ import annotations

from sagemeter.report.document import Block, Callout, Cell, Paragraph, Section, Table
from sagemeter.report.figures import NA, num, spread_note
from sagemeter.report.rows import (
    comparison_row,
    figure_row,
    incomplete_of,
    interval_note,
    name_of,
    noise_of,
    ratio_header,
)
from sagemeter.report.runs import Run
from sagemeter.results import MeasureResult, PrefillDetail

TITLE, ANCHOR = "Prefill (prompt processing)", "prefill"


def _prefill(result: MeasureResult) -> PrefillDetail | None:
    return result.detail.prefill if result.detail else None


def prefill_section(run: Run) -> Section | None:
    """How fast each checkpoint reads a prompt; None when no file ran the phase (older files,
    the article's method), so their reports keep the article's sections."""
    contenders = run.contenders
    details = [_prefill(r) for r in contenders]
    known = next((d for d in details if d), None)
    if known is None:
        return None  # the scope section says what was not measured
    blocks: list[Block] = [
        Paragraph(
            f"Single streamed requests asking one token, at prompts of {known.short_tokens} and "
            f"{known.long_tokens} tokens (the server's own count), {known.repeats} of each, "
            "alternated; every prompt differs from the others from its first token, so no "
            f"prefix cache serves it. The rate is (long − short prompt tokens) / (median "
            "TTFT(long) − median TTFT(short)); the fixed cost is what a first token costs "
            "besides the prompt."
        )
    ]
    for result, detail in zip(contenders, details, strict=True):
        if detail is not None and not detail.valid:
            reason = "; ".join(detail.problems) or "marked invalid"
            blocks.append(Callout(f"{name_of(result)}: no prefill rate ({reason})"))
    header = ["", *(name_of(r) for r in contenders), *ratio_header(contenders)]
    blocks.append(Table(header=header, rows=_rows(run, details)))
    return Section(TITLE, ANCHOR, blocks)


def _rows(run: Run, details: list[PrefillDetail | None]) -> list[list[Cell]]:
    contenders = run.contenders
    noise, incomplete = noise_of(run), incomplete_of(run)

    def rate_note(result: MeasureResult, detail: PrefillDetail | None) -> str:
        if detail is None:
            return "not measured"
        engine = detail.engine_tokens_per_second
        engine_text = f"; engine's own {spread_note(engine)}" if engine else ""
        return (interval_note(result, "prefill_tokens_per_second") or f"interval {NA}") + (
            engine_text
        )

    def cache_note(detail: PrefillDetail | None) -> str:
        cache = detail.prefix_cache if detail else None
        if cache is None:
            return ""
        if cache.problem:
            return cache.problem
        said = cache.cached_tokens_reported
        return (
            f"{num(cache.first_ttft_s, scale=1000)} → {num(cache.second_ttft_s, scale=1000)} ms"
            + (f"; the server said {said} tokens were cached" if said is not None else "")
        )

    return [
        figure_row(
            "Prefill (prompt tokens/s)",
            [r.prefill_tokens_per_second for r in contenders],
            [rate_note(r, d) for r, d in zip(contenders, details, strict=True)],
            higher=True,
            noise=noise,
            incomplete=incomplete,
            compared=comparison_row(run, "prefill_tokens_per_second"),
        ),
        figure_row(
            "Time to first token, long prompt, median (ms)",
            [r.ttft_long_prompt_ms for r in contenders],
            [spread_note(d.long_ttft if d else None, scale=1000) for d in details],
            higher=False,
            noise=noise,
            incomplete=incomplete,
            compared=comparison_row(run, "ttft_long_prompt_ms"),
        ),
        figure_row(
            "Time to first token, short prompt, median (ms)",
            [d.short_ttft.median if d and d.short_ttft else None for d in details],
            [spread_note(d.short_ttft if d else None, scale=1000) for d in details],
            higher=False,
            scale=1000,
        ),
        figure_row(
            "First-token fixed cost (ms)",
            [d.per_call_fixed_cost_s if d else None for d in details],
            scale=1000,
        ),
        figure_row(
            "Same long prompt again: speed-up (×)",
            [d.prefix_cache.speedup if d and d.prefix_cache else None for d in details],
            [cache_note(d) for d in details],
            with_ratio=False,
        ),
    ]
