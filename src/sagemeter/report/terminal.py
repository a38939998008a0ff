"""Rich tables for the terminal: the article's combine table, and one result's summary."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sagemeter.compare import Comparison, Row, across_methods_note
from sagemeter.figures import (
    figure_named,
    figures,
    format_figure,
    level_figure_of,
    level_label,
    level_values,
    plugin_level_figures,
    stored_value,
)
from sagemeter.figures.builtin import KV_CACHE, LOAD_SECONDS
from sagemeter.figures.declaration import level_short
from sagemeter.printable import SafeConsole, printable
from sagemeter.report.figures import interval_span, ratio_text
from sagemeter.results import MeasureResult, Spread
from sagemeter.results.endpoint_metrics import EndpointMetrics


def format_value(key: str, value: float | None) -> str:
    """Figures as the article prints them: no trailing zeros, dollars to the cent, counts as
    their declarations say (with separators, no decimals)."""
    if value is None:
        return "-"
    if _is_cost(key):
        return f"{value:.2f}"
    return format_figure(figure_named(key), value)


def _is_cost(key: str) -> bool:
    """A cost row (dollars to the cent): a priced level family's or the SLO's."""
    found = level_figure_of(key)
    declared = found[0] if found is not None else figure_named(key)
    return getattr(declared, "priced_from", None) is not None


# Row keys in words short enough that three files and two ratio columns fit 80 columns (a
# declared figure or level family says its own).
_SHORT_WORDS = (
    ("_tokens_per_second", " tok/s"),
    ("_", " "),
)


def figure_label(key: str, narrow: bool) -> str:
    """The row's key as the result files spell it, or in short words on a narrow terminal."""
    if not narrow:
        return key
    figure = figure_named(key)
    if figure is not None and (short := getattr(figure, "short", None)):
        return str(short)
    found = level_figure_of(key)
    if found is not None and (short := level_short(*found)):
        return short
    for long, short_words in _SHORT_WORDS:
        key = key.replace(long, short_words)
    return key


def comparison_table(comparison: Comparison, width: int | None = None) -> Table:
    """Files as `[1]`, `[2]` … (their names on lines of their own, `name_lines`), each ratio
    with its interval on a second line, so that the table reads at 80 columns, piped or not;
    when the full keys would not fit `width`, they are said in short words."""
    table = _table(comparison, narrow=False)
    if width is not None and SafeConsole(width=10_000).measure(table).maximum > width:
        table = _table(comparison, narrow=True)
    return table


def _table(comparison: Comparison, *, narrow: bool) -> Table:
    table = Table(title="comparison", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("figure", no_wrap=not narrow)  # narrow: a long label wraps, never a value
    for number in range(1, len(comparison.names) + 1):
        table.add_column(f"[{number}]", justify="right", no_wrap=True)
    for number in range(2, len(comparison.names) + 1):
        table.add_column(f"[{number}]/[1]", justify="right", no_wrap=True)
    for row in comparison.rows:
        table.add_row(
            figure_label(row.key, narrow),
            *(format_value(row.key, value) for value in row.values),
            *(_ratio_text(row, index) for index in range(len(row.ratios))),
        )
    return table


def name_lines(comparison: Comparison) -> list[str]:
    """`[1] NAME`, one line per file, with `(incomplete)` where it misses a figure."""
    lines = []
    for number, name in enumerate(comparison.names, start=1):
        line = f"[{number}] {name}"
        if _is_incomplete(comparison, number - 1):
            line += " (incomplete)"
        lines.append(line)
    return lines


def _is_incomplete(comparison: Comparison, index: int) -> bool:
    """The file said `complete: false` (its warning says what is missing)."""
    return index < len(comparison.incomplete) and comparison.incomplete[index] is not None


def _ratio_text(row: Row, index: int) -> str:
    """`2.22` over `[2.06-2.83]` (a second line), with `*` when the ratio cannot be told from
    no change (or its two files were measured by different methods)."""
    ratio = row.ratios[index]
    if ratio is None and row.differences is not None and index < len(row.differences):
        difference = row.differences[index]  # a figure compared by its difference
        return "" if difference is None else f"{difference:+.3g}"
    if ratio is None:
        return ""
    text = ratio_text(ratio)
    flags = row.ratio_flags
    if index < len(flags) and flags[index]:
        text += " *"
    bounds = row.ratio_intervals[index] if index < len(row.ratio_intervals) else None
    if bounds is not None:
        text += f"\n[{interval_span(bounds)}]"
    return text


def _flag_lines(comparison: Comparison) -> list[str]:
    lines = []
    for row in comparison.rows:
        for index, flag in enumerate(row.ratio_flags):
            if flag:
                lines.append(f"* {row.key} [{index + 2}]/[1]: {flag}")
    return lines


def methods_line(comparison: Comparison) -> str | None:
    """Which method measured each file: one word when they agree, file by file when not."""
    methods = comparison.methods
    known = {method for method in methods if method is not None}
    if not known:
        return None
    if len(known) == 1 and None not in methods:
        return f"method: {known.pop()} (every file)"
    return "methods: " + ", ".join(
        f"[{number}] {method or 'not recorded'}" for number, method in enumerate(methods, start=1)
    )


def print_comparison(console: Console, comparison: Comparison) -> None:
    for name in name_lines(comparison):
        console.print(name, highlight=False, markup=False)
    console.print(comparison_table(comparison, console.width))
    if line := methods_line(comparison):
        console.print(line, highlight=False)
    if any(bounds for row in comparison.rows for bounds in row.ratio_intervals):
        console.print("ratios: [95% bootstrap interval over the repeats, both sides resampled]")
    flags = _flag_lines(comparison)
    if flags:
        console.print("* = the ratio cannot be told from no change, or is across methods:")
    for line in flags:
        console.print(f"  {line}", highlight=False)
    if comparison.identical_answers:
        console.print(
            f"identical answers ({comparison.names[0]} vs {comparison.names[1]}): "
            f"{comparison.identical_answers}"
        )
    if comparison.drift:
        drift = comparison.drift
        changes = {figure.key: figure.change for figure in drift.figures}
        parts = [
            f"{key.removesuffix('_tokens_per_second')} {change:+.2%}"
            for key, change in (changes or drift.relative_change).items()
            if change is not None
        ]
        worst = drift.max_abs_relative_change
        console.print(
            f"A-B-A drift ({drift.first} → {drift.last}): "
            + ", ".join(parts)
            + (f"; largest speed drift {worst:.2%}" if worst is not None else "")
        )
        if drift.identical_answers:
            console.print(f"identical answers A vs A': {drift.identical_answers}")
    for check in comparison.quality_checks:
        colour = {"PASS": "green", "FAIL": "red"}.get(check.verdict, "yellow")
        console.print(
            f"quality verdict, {check.candidate} against {check.reference}: "
            f"[bold {colour}]{check.verdict}[/]"
        )
        if note := across_methods_note(check):
            console.print(f"[yellow]{note}[/]", highlight=False)
        for line in check.summary:
            console.print(line, highlight=False, markup=False)
    for fidelity in comparison.fidelity_checks:
        console.print(f"token-level fidelity, {fidelity.candidate} against {fidelity.reference}:")
        for line in fidelity.summary:
            console.print(f"  {line}", highlight=False, markup=False)
    for warning in comparison.warnings:
        console.print(f"[yellow]warning:[/] {escape(printable(warning))}", highlight=False)


def _spread_text(spread: Spread | None, scale: float = 1.0, unit: str = "") -> str:
    if spread is None:
        return "-"
    return (
        f"median {spread.median * scale:.3g}{unit} (min {spread.min * scale:.3g}, "
        f"p90 {spread.p90 * scale:.3g}, p99 {spread.p99 * scale:.3g}, "
        f"max {spread.max * scale:.3g}; n={spread.n})"
    )


def print_result(console: Console, result: MeasureResult) -> None:
    table = Table(title=f"measure-{result.name}", show_header=False)
    table.add_column("figure")
    table.add_column("value")
    detail = result.detail
    table.add_row("decode tokens/s", format_value("decode", result.decode_tokens_per_second))
    table.add_row("per-call fixed cost s", format_value("cost", result.per_call_fixed_cost_seconds))
    if detail and detail.decode:
        decode = detail.decode
        table.add_row("  long replies s", _spread_text(decode.long_reply_s))
        table.add_row("  engine's own tokens/s", _spread_text(decode.engine_tokens_per_second))
        table.add_row("  TTFT", _spread_text(decode.ttft_s, 1000, " ms"))
        table.add_row(
            "  inter-token latency", _spread_text(decode.inter_token_latency_s, 1000, " ms")
        )
        table.add_row(
            "  time per output token", _spread_text(decode.time_per_output_token_s, 1000, " ms")
        )
        if decode.reasoning_events:
            table.add_row("  reasoning token events", str(decode.reasoning_events))
    if detail and detail.prefill:
        _prefill_rows(table, result)
    if detail and detail.load:
        for level in detail.load.levels:
            value = format_value("load", level.tokens_per_second)
            if level.problem:
                value += f" ({level.problem})"
            table.add_row(f"{level.concurrency} at once tokens/s", value)
    else:
        for key, figure in result.load_tokens_per_second.items():
            table.add_row(f"{key} at once tokens/s", format_value("load", figure))
    _long_prompt_rows(table, result)
    for declared in figures(["more"]):  # a plug-in's figures, as declared
        if (found := stored_value(result, declared)) is not None:
            table.add_row(declared.label, format_value(declared.key, float(found)))
    for family in plugin_level_figures():  # a plug-in's level families, as declared
        for at, found_at in level_values(result, family).items():
            table.add_row(level_label(family, at), format_value(family.name, found_at))
    table.add_row("quality", _quality_text(result))
    table.add_row("weights GiB", format_value("weights", result.weights_gib))
    table.add_row("KV cache tokens", format_value(KV_CACHE.key, _opt_float(result.kv_cache_tokens)))
    table.add_row("load seconds", format_value(LOAD_SECONDS.key, result.load_seconds))
    if detail and detail.endpoint_metrics:
        _endpoint_rows(table, detail.endpoint_metrics)
    console.print(table)
    if detail:
        for warning in detail.warnings:
            console.print(f"[yellow]warning:[/] {warning}", highlight=False)
        busy = detail.host.busy_note() if detail.host else None
        if busy:
            console.print(f"[yellow]warning:[/] {busy}", highlight=False)


def _endpoint_rows(table: Table, metrics: EndpointMetrics) -> None:
    """Per phase, SageMaker's CloudWatch split of a request's time: model / SageMaker overhead /
    client and network (ms), and the GPU's use; "-" where a figure is null (the warnings and
    `detail.endpoint_metrics` say why)."""

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:,.1f}"

    for phase in metrics.phases:
        split = " / ".join(
            ms(v)
            for v in (
                phase.model_latency_ms,
                phase.overhead_latency_ms,
                phase.client_and_network_ms,
            )
        )
        gpu = phase.gpu_utilization_pct
        table.add_row(
            f"endpoint {phase.phase}: model / overhead / client+network ms",
            split + ("" if gpu is None else f" (GPU {gpu:.0f}%)"),
        )


def _prefill_rows(table: Table, result: MeasureResult) -> None:
    """The prefill rate (or why there is none), the TTFT at each length and the cache pair."""
    prefill = result.detail.prefill if result.detail else None
    if prefill is None:
        return
    value = format_value("prefill", result.prefill_tokens_per_second)
    if not prefill.valid and prefill.problems:
        value += f" ({prefill.problems[0]})"
    table.add_row("prefill tokens/s", value)
    if prefill.per_call_fixed_cost_s is not None:
        table.add_row(
            "  first-token fixed cost s", format_value("cost", prefill.per_call_fixed_cost_s)
        )
    table.add_row(
        f"  TTFT, {prefill.short_tokens}-token prompt",
        _spread_text(prefill.short_ttft, 1000, " ms"),
    )
    table.add_row(
        f"  TTFT, {prefill.long_tokens}-token prompt", _spread_text(prefill.long_ttft, 1000, " ms")
    )
    if prefill.engine_tokens_per_second is not None:
        table.add_row(
            "  engine's own prompt tokens/s", _spread_text(prefill.engine_tokens_per_second)
        )
    cache = prefill.prefix_cache
    if cache is not None and cache.speedup is not None:
        table.add_row("  same long prompt again", f"{cache.speedup:.2f}× faster to a first token")
    if cache is not None and cache.server_counters_note:
        table.add_row(
            "  server's prefix-cache counters", escape(printable(cache.server_counters_note))
        )


def _long_prompt_rows(table: Table, result: MeasureResult) -> None:
    """Long prompts under load: each level's throughput (or why none) and TTFT p50/p90."""
    long_load = result.detail.long_prompt_load if result.detail else None
    if long_load is None:
        return
    for level in long_load.levels:
        value = format_value("load", level.tokens_per_second)
        if level.problem:
            value += f" ({level.problem})"
        elif level.ttft_s is not None:
            value += (
                f"; TTFT p50 {level.ttft_s.median * 1000:.1f} ms, "
                f"p90 {level.ttft_s.p90 * 1000:.1f} ms"
            )
        table.add_row(
            f"{level.concurrency} at once, {long_load.prompt_tokens}-token prompts tok/s", value
        )


def _quality_text(result: MeasureResult) -> str:
    """`37/40`, or `35/38 of 40 (2 unanswered)` when some questions got no answer."""
    quality = result.detail.quality if result.detail else None
    if quality is None or quality.answered_count == quality.total:
        return result.quality or "-"
    answered, total = quality.answered_count, quality.total
    return f"{quality.correct}/{answered} of {total} ({total - answered} unanswered)"


def _opt_float(value: int | None) -> float | None:
    return None if value is None else float(value)
