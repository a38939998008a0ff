"""The report's prompt-processing section: the prefill rate, the first token at each prompt
length, and what the prefix cache did to the same long prompt sent twice.

Renders only: every figure and interval is in the result files (measure/prefill.py).
"""

from __future__ import annotations

from sagemeter.figures import level_key
from sagemeter.figures.builtin import PREFILL, TTFT_LONG_PROMPT
from sagemeter.figures.builtin_levels import LONG_PROMPT, LONG_PROMPT_TTFT_P50, LONG_PROMPT_TTFT_P90
from sagemeter.report.document import Block, Callout, Cell, Figure, Paragraph, Section, Table
from sagemeter.report.figures import NA, num, spread_note
from sagemeter.report.rows import (
    comparison_row,
    figure_row,
    incomplete_of,
    interval_note,
    latency_note,
    name_of,
    noise_of,
    ratio_header,
)
from sagemeter.report.runs import Run
from sagemeter.results import LoadLevel, LongPromptLoad, MeasureResult, PrefillDetail

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
    blocks.append(
        Figure("prefill", "Time to first token against prompt length, every counted prompt.")
    )
    blocks.extend(long_prompt_blocks(run))
    return Section(TITLE, ANCHOR, blocks)


def _long_load(result: MeasureResult) -> LongPromptLoad | None:
    return result.detail.long_prompt_load if result.detail else None


def _long_level(result: MeasureResult, level: str) -> LoadLevel | None:
    found = _long_load(result)
    levels = found.levels if found else []
    return next((lv for lv in levels if str(lv.concurrency) == level), None)


def long_prompt_blocks(run: Run) -> list[Block]:
    """Long prompts under load: each level's throughput and first-token wait per checkpoint;
    nothing when no file ran it."""
    contenders = run.contenders
    loads = [_long_load(r) for r in contenders]
    known = next((load for load in loads if load), None)
    if known is None:
        return []
    levels = sorted(
        {level for r in contenders for level in r.long_prompt_tokens_per_second}, key=int
    )
    blocks: list[Block] = [
        Paragraph(
            f"Long prompts under load: the parallel levels again, every request its own prompt of "
            f"{known.prompt_tokens} tokens (unique from its first token, so no prefix cache "
            f"serves it), {known.max_tokens} tokens per reply, {known.batches_per_level} "
            "batches per level. Where smaller weights leave more room in the KV cache, it shows "
            "here."
        )
    ]
    for result, load in zip(contenders, loads, strict=True):
        if load is not None and load.problem:
            blocks.append(Callout(f"{name_of(result)}: long prompts not measured ({load.problem})"))
    noise, incomplete = noise_of(run), incomplete_of(run)
    rows: list[list[Cell]] = []
    for level in levels:
        key = level_key(LONG_PROMPT, level)
        details = [_long_level(r, level) for r in contenders]
        rows += [
            figure_row(
                f"{level} at once, long prompts (tokens/s)",
                [r.long_prompt_tokens_per_second.get(level) for r in contenders],
                [
                    interval_note(r, key) or (d.problem if d and d.problem else f"interval {NA}")
                    for r, d in zip(contenders, details, strict=True)
                ],
                higher=True,
                noise=noise,
                incomplete=incomplete,
                compared=comparison_row(run, key),
            ),
            figure_row(
                f"{level} at once, long prompts: TTFT p50 (ms)",
                [r.long_prompt_ttft_p50_ms.get(level) for r in contenders],
                [latency_note(d.ttft_s if d else None) for d in details],
                higher=False,
                noise=noise,
                incomplete=incomplete,
                compared=comparison_row(run, level_key(LONG_PROMPT_TTFT_P50, level)),
            ),
            figure_row(
                f"{level} at once, long prompts: TTFT p90 (ms)",
                [r.long_prompt_ttft_p90_ms.get(level) for r in contenders],
                higher=False,
                noise=noise,
                incomplete=incomplete,
                compared=comparison_row(run, level_key(LONG_PROMPT_TTFT_P90, level)),
            ),
        ]
    header = ["", *(name_of(r) for r in contenders), *ratio_header(contenders)]
    blocks.append(Table(header=header, rows=rows))
    return blocks


def _rows(run: Run, details: list[PrefillDetail | None]) -> list[list[Cell]]:
    contenders = run.contenders
    noise, incomplete = noise_of(run), incomplete_of(run)

    def rate_note(result: MeasureResult, detail: PrefillDetail | None) -> str:
        if detail is None:
            return "not measured"
        engine = detail.engine_tokens_per_second
        engine_text = f"; engine's own {spread_note(engine)}" if engine else ""
        return (interval_note(result, PREFILL.key) or f"interval {NA}") + (engine_text)

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
            + (f"; {cache.server_counters_note}" if cache.server_counters_note else "")
        )

    return [
        figure_row(
            "Prefill (prompt tokens/s)",
            [r.prefill_tokens_per_second for r in contenders],
            [rate_note(r, d) for r, d in zip(contenders, details, strict=True)],
            higher=True,
            noise=noise,
            incomplete=incomplete,
            compared=comparison_row(run, PREFILL.key),
        ),
        figure_row(
            "Time to first token, long prompt, median (ms)",
            [r.ttft_long_prompt_ms for r in contenders],
            [spread_note(d.long_ttft if d else None, scale=1000) for d in details],
            higher=False,
            noise=noise,
            incomplete=incomplete,
            compared=comparison_row(run, TTFT_LONG_PROMPT.key),
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
