"""The report's plots as PNG bytes (matplotlib's Agg canvas, no display, no global pyplot state).

Each plot is 8 × 4.5 inches at 150 dpi (1200 px wide) with 11-point text, so it stays readable
shown at 800 px. Colours are the Okabe–Ito palette, safe for the common colour-vision
deficiencies; a re-measure (A′) keeps its checkpoint's colour and gets a dashed line.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from sagemeter.compare.costs import cost_per_million_tokens
from sagemeter.errors import UserError
from sagemeter.report.figures import quality_shares
from sagemeter.request_record import RequestRecord
from sagemeter.results import DecodeDetail, MeasureResult, PrefillDetail

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

OKABE_ITO = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",  # black
)
WIDTH_IN, HEIGHT_IN, DPI = 8.0, 4.5, 150
PLOT_KEYS = ("throughput", "decode_fit", "latency", "prefill", "cost", "quality")


@dataclass(frozen=True)
class Series:
    """One result as drawn: its legend label, colour, line style and marker."""

    label: str
    result: MeasureResult
    color: str
    linestyle: str = "-"
    marker: str = "o"
    price_per_hour: float | None = None


def palette(index: int) -> str:
    return OKABE_ITO[index % len(OKABE_ITO)]


def _new_figure(columns: int = 1) -> tuple[Figure, list[Axes]]:
    try:
        from matplotlib.figure import Figure
    except ModuleNotFoundError:
        raise UserError(
            "plots need matplotlib: pip install 'matplotlib>=3.8' (or use --format md)"
        ) from None
    figure = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="constrained")
    axes = [figure.add_subplot(1, columns, i + 1) for i in range(columns)]
    for ax in axes:
        ax.grid(True, color="#dddddd", linewidth=0.8)
        ax.set_axisbelow(True)
        ax.tick_params(labelsize=10)
    return figure, axes


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None}, facecolor="white")
    return buffer.getvalue()


def _style(ax: Axes, title: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(title, fontsize=12)
    ax.set_xlabel(xlabel, fontsize=11)
    ax.set_ylabel(ylabel, fontsize=11)


def _wide_range(values: Iterable[float]) -> bool:
    """More than 30× between smallest and largest: a linear axis would flatten the small ones."""
    positive = [v for v in values if v > 0]
    return bool(positive) and max(positive) / min(positive) > 30


def _legend_below(figure: Figure, ax: Axes, entries: int) -> None:
    """Bars fill the axes, so their legend goes under the plot, out of their way."""
    handles, labels = ax.get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=min(entries, 3), fontsize=10)


def _measured_levels(result: MeasureResult) -> list[tuple[int, float]]:
    """(requests at once, tokens/s) of each level with a figure; a level without one is null."""
    found = result.load_tokens_per_second.items()
    return sorted((int(level), value) for level, value in found if value is not None)


def throughput_plot(series: list[Series]) -> bytes | None:
    """Tokens/s against requests at once; pooled figure as a line, each batch as a dot."""
    drawn = [s for s in series if _measured_levels(s.result)]
    if not drawn:
        return None
    figure, (ax,) = _new_figure()
    levels: set[int] = set()
    for s in drawn:
        points = _measured_levels(s.result)
        levels.update(level for level, _ in points)
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, color=s.color, linestyle=s.linestyle, marker=s.marker, label=s.label)
        load = s.result.detail.load if s.result.detail else None
        for level in load.levels if load else []:
            batch = [b.tokens_per_second for b in level.batches]
            ax.scatter(
                [level.concurrency] * len(batch), batch, color=s.color, s=14, alpha=0.6, zorder=3
            )
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(levels), [str(level) for level in sorted(levels)])
    unit = "output tokens/s"
    if _wide_range(v for s in drawn for _, v in _measured_levels(s.result)):
        ax.set_yscale("log")
        unit += " (log scale)"
    else:
        ax.set_ylim(bottom=0)
    _style(ax, "Throughput against requests at once", "requests at once", unit)
    ax.legend(fontsize=10, title="line: pooled batches · dots: each batch", title_fontsize=9)
    return _png(figure)


DECODE_FIT_NOTE = (
    "thick line: the decode rate reported, (long − short) / (median t(long) − median t(short)):\n"
    "medians, so one slow reply does not move it. dotted: least squares through every\n"
    "reply, which a slow reply pulls; the two part when some replies were slow."
)


@dataclass(frozen=True)
class FitLine:
    """One line of the decode plot: reply time = intercept + slope × tokens."""

    slope: float
    intercept: float
    label: str
    linestyle: str


def decode_fit_lines(s: Series, decode: DecodeDetail) -> list[FitLine]:
    """The reported (differential) rate's line and the least-squares line, each labelled with
    what it is, so two different rates beside each other are explained, not a puzzle."""
    lines = []
    rate, fixed = decode.tokens_per_second, decode.per_call_fixed_cost_s
    if rate is not None and rate > 0 and fixed is not None:
        lines.append(
            FitLine(
                1 / rate, fixed, f"{s.label}: {rate:.3g} tokens/s, the rate reported", s.linestyle
            )
        )
    xs = [decode.short_tokens] * len(decode.short_times_s) + [decode.long_tokens] * len(
        decode.long_times_s
    )
    if len(set(xs)) >= 2:
        ys = decode.short_times_s + decode.long_times_s
        slope, intercept = np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)
        fitted = decode.least_squares_tokens_per_second or (1 / slope if slope > 0 else None)
        text = f"{fitted:.3g} tokens/s" if fitted else "no positive slope"
        lines.append(
            FitLine(float(slope), float(intercept), f"{s.label}: least squares {text}", ":")
        )
    return lines


def _legend(ax: Any, **options: Any) -> None:
    """A legend when something drawn has a label (an incomplete result's decode can have no
    line, and matplotlib warns on stderr about an empty legend)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**options)


def decode_fit_plot(series: list[Series]) -> bytes | None:
    """Reply time against reply length: every reply, the reported rate's line (through the
    medians) and the least-squares line (every point); each slope is 1 / a decode rate."""
    drawn: list[tuple[Series, DecodeDetail]] = [
        (s, s.result.detail.decode) for s in series if s.result.detail and s.result.detail.decode
    ]
    if not drawn:
        return None
    figure, (ax,) = _new_figure()
    longest = 0
    for s, decode in drawn:
        xs = [decode.short_tokens] * len(decode.short_times_s) + [decode.long_tokens] * len(
            decode.long_times_s
        )
        ys = decode.short_times_s + decode.long_times_s
        longest = max(longest, decode.long_tokens)
        ax.scatter(xs, ys, color=s.color, marker=s.marker, s=22, alpha=0.75, zorder=3)
        line_x = np.array([0.0, decode.long_tokens * 1.05])
        for line in decode_fit_lines(s, decode):
            ax.plot(
                line_x,
                line.intercept + line.slope * line_x,
                color=s.color,
                linestyle=line.linestyle,
                linewidth=1.0 if line.linestyle == ":" else 1.6,
                label=line.label,
            )
    ax.set_xlim(0, longest * 1.08)
    ax.set_ylim(bottom=0)
    _style(ax, "Reply time against reply length", "reply length (output tokens)", "reply time (s)")
    ax.text(0.01, 0.98, DECODE_FIT_NOTE, transform=ax.transAxes, va="top", fontsize=7.5)
    _legend(ax, fontsize=9, loc="lower right")
    return _png(figure)


PREFILL_NOTE = (
    "dots: every counted prompt (the server's own count). line: the prefill rate reported,\n"
    "its slope 1 / rate, its height at zero the first token's fixed cost."
)


def prefill_points(prefill: PrefillDetail) -> list[tuple[int, float]]:
    """(prompt tokens, TTFT s) of every counted prompt, short and long."""
    tokens = [*prefill.short_prompt_tokens, *prefill.long_prompt_tokens]
    ttfts = [*prefill.short_ttft_s, *prefill.long_ttft_s]
    return list(zip(tokens, ttfts, strict=False))


def prefill_plot(series: list[Series]) -> bytes | None:
    """Time to first token against prompt length, per checkpoint: every counted prompt, and the
    reported rate's line (fixed cost + tokens / rate) where there is a rate."""
    drawn: list[tuple[Series, PrefillDetail]] = [
        (s, s.result.detail.prefill)
        for s in series
        if s.result.detail and s.result.detail.prefill and prefill_points(s.result.detail.prefill)
    ]
    if not drawn:
        return None
    figure, (ax,) = _new_figure()
    longest = 0
    for s, prefill in drawn:
        xs, ys = zip(*prefill_points(prefill), strict=True)
        longest = max(longest, *xs)
        rate, fixed = prefill.tokens_per_second, prefill.per_call_fixed_cost_s
        label = f"{s.label}: {rate:.4g} prompt tokens/s" if rate else f"{s.label}: no rate"
        ax.scatter(
            xs,
            [y * 1000.0 for y in ys],
            color=s.color,
            marker=s.marker,
            s=22,
            alpha=0.75,
            zorder=3,
            label=label,
        )
        if rate and fixed is not None:
            line_x = np.array([0.0, max(xs) * 1.05])
            ax.plot(
                line_x,
                (fixed + line_x / rate) * 1000.0,
                color=s.color,
                linestyle=s.linestyle,
                linewidth=1.4,
            )
    ax.set_xlim(0, longest * 1.08)
    ax.set_ylim(bottom=0)
    _style(
        ax,
        "Time to first token against prompt length",
        "prompt length (the server's tokens)",
        "time to first token (ms)",
    )
    ax.text(0.01, 0.98, PREFILL_NOTE, transform=ax.transAxes, va="top", fontsize=7.5)
    _legend(ax, fontsize=9, loc="lower right")
    return _png(figure)


def _ecdf(ax: Axes, values: list[float], s: Series) -> None:
    ordered = np.sort(np.asarray(values, float)) * 1000.0
    shares = np.arange(1, ordered.size + 1) / ordered.size
    ax.step(ordered, shares, where="post", color=s.color, linestyle=s.linestyle, label=s.label)


def latency_plot(series: list[Series]) -> bytes | None:
    """TTFT and inter-token gaps of every streamed request, as cumulative distributions."""
    samples = []
    for s in series:
        records = _records(s.result)
        ttft = [r.first_token_s for r in records if r.first_token_s is not None]
        gaps = [g for r in records for g in r.gaps_s()]
        if ttft or gaps:
            samples.append((s, ttft, gaps))
    if not samples:
        return None
    figure, (left, right) = _new_figure(columns=2)
    for s, ttft, gaps in samples:
        if ttft:
            _ecdf(left, ttft, s)
        if gaps:
            _ecdf(right, gaps, s)
    for ax, title in ((left, "Time to first token"), (right, "Inter-token latency")):
        _style(ax, title, "milliseconds (log scale)", "share of requests ≤ x")
        ax.set_xscale("log")
        ax.set_ylim(0, 1.02)
    right.set_ylabel("share of gaps ≤ x", fontsize=11)
    left.legend(fontsize=9, loc="best")
    figure.suptitle("All streamed requests, decode and parallel", fontsize=10)
    return _png(figure)


def _records(result: MeasureResult) -> list[RequestRecord]:
    detail = result.detail
    if detail is None:
        return []
    records = list(detail.decode.records) if detail.decode else []
    for level in detail.load.levels if detail.load else []:
        records += level.records
    return [r for r in records if r.ok]


def cost_plot(series: list[Series]) -> bytes | None:
    """USD per million output tokens at each concurrency; whiskers span the batches."""
    priced = [s for s in series if s.price_per_hour and _measured_levels(s.result)]
    if not priced:
        return None
    levels = sorted({level for s in priced for level, _ in _measured_levels(s.result)})
    figure, (ax,) = _new_figure()
    width = 0.8 / len(priced)
    heights_seen: list[float] = []
    for index, s in enumerate(priced):
        price = s.price_per_hour
        assert price is not None
        heights, lows, highs = [], [], []
        for level in levels:
            tps = s.result.load_tokens_per_second.get(str(level))
            cost = cost_per_million_tokens(price, tps) if tps else np.nan
            heights.append(cost)
            batches = _batch_rates(s.result, level)
            low = cost_per_million_tokens(price, max(batches)) if batches else cost
            high = cost_per_million_tokens(price, min(batches)) if batches else cost
            lows.append(max(cost - low, 0.0))
            highs.append(max(high - cost, 0.0))
        heights_seen += [h for h in heights if not np.isnan(h)]
        xs = np.arange(len(levels)) + (index - (len(priced) - 1) / 2) * width
        bars = ax.bar(
            xs,
            heights,
            width,
            yerr=[lows, highs] if any(lows + highs) else None,
            color=s.color,
            hatch="//" if s.linestyle != "-" else None,
            edgecolor="white",
            label=s.label,
            capsize=3,
        )
        ax.bar_label(bars, labels=[f"${h:.2f}" for h in heights], fontsize=9, padding=2)
    ax.set_xticks(np.arange(len(levels)), [str(level) for level in levels])
    unit = "USD per million output tokens"
    if _wide_range(heights_seen):
        ax.set_yscale("log")
        unit += " (log)"
    ax.margins(y=0.12)
    _style(ax, "Cost per million output tokens", "requests at once", unit)
    _legend_below(figure, ax, len(priced))
    return _png(figure)


def _batch_rates(result: MeasureResult, level: int) -> list[float]:
    load = result.detail.load if result.detail else None
    for found in load.levels if load else []:
        if found.concurrency == level:
            return [b.tokens_per_second for b in found.batches if b.tokens_per_second > 0]
    return []


def quality_plot(series: list[Series]) -> bytes | None:
    """Share correct per question family with Wilson 95% intervals."""
    counted = [(s, quality_shares(s.result)) for s in series]
    counted = [(s, counts) for s, counts in counted if counts]
    if not counted:
        return None
    families: list[str] = []
    for _, counts in counted:
        families += [f for f in counts if f not in families]
    families.sort(key=lambda f: f == "Total")
    figure, (ax,) = _new_figure()
    width = 0.8 / len(counted)
    for index, (s, counts) in enumerate(counted):
        shares, lows, highs, tags = [], [], [], []
        for family in families:
            found = counts.get(family)
            correct, total = (found.correct, found.total) if found else (0, 0)
            low, high = (found.low, found.high) if found else (0.0, 1.0)
            share = correct / total if total else np.nan
            shares.append(share * 100)
            lows.append(max(share - low, 0) * 100 if total else 0)
            highs.append(max(high - share, 0) * 100 if total else 0)
            tags.append(f"{correct}/{total}" if total else "n/a")
        xs = np.arange(len(families)) + (index - (len(counted) - 1) / 2) * width
        ax.bar(
            xs,
            shares,
            width,
            yerr=[lows, highs],
            color=s.color,
            hatch="//" if s.linestyle != "-" else None,
            edgecolor="white",
            label=s.label,
            capsize=3,
        )
        for x, share, high, tag in zip(xs, shares, highs, tags, strict=True):
            top = 0.0 if np.isnan(share) else share + high
            ax.text(x, top + 1.5, tag, ha="center", va="bottom", fontsize=8)
    ax.set_xticks(np.arange(len(families)), families)
    ax.set_ylim(0, 112)
    ax.set_yticks(range(0, 101, 20))
    _style(
        ax,
        "Checked answers per question family (whiskers: Wilson 95% interval)",
        "question family",
        "correct (%)",
    )
    _legend_below(figure, ax, len(counted))
    return _png(figure)


def _probes(result: MeasureResult) -> list[dict[str, Any]]:
    """The operating-point search's probes with a TTFT and a verdict, by load (a plan's [slo]
    table): a probe with no verdict (not measured, or too short) is no point on the plane."""
    search = result.slo_search or {}
    probes = [
        p
        for p in search.get("probes", [])
        if isinstance(p.get("ttft_s"), int | float) and p.get("judged", True)
    ]
    return sorted(probes, key=lambda p: p.get("rate") or p.get("concurrency") or 0)


def slo_plot(series: list[Series]) -> bytes | None:
    """Throughput against TTFT at the SLO's percentile, every probe of each arm's search: the
    Pareto view of the operating point (filled: met the SLO; hollow: missed)."""
    drawn = [s for s in series if _probes(s.result)]
    if not drawn:
        return None
    figure, (ax,) = _new_figure()
    search = drawn[0].result.slo_search or {}
    name = f"p{search.get('percentile', 99):g}"
    for s in drawn:
        probes = _probes(s.result)
        xs = [p["ttft_s"] * 1e3 for p in probes]
        ys = [p["output_tokens_per_second"] for p in probes]
        ax.plot(xs, ys, color=s.color, linestyle=s.linestyle, linewidth=1, label=s.label)
        for x, y, probe in zip(xs, ys, probes, strict=True):
            met = bool(probe.get("passed"))
            ax.scatter(
                [x],
                [y],
                s=36,
                marker=s.marker,
                facecolors=s.color if met else "white",
                edgecolors=s.color,
                zorder=3,
            )
            load = probe.get("rate") or probe.get("concurrency")
            ax.annotate(f"{load:g}", (x, y), fontsize=8, xytext=(4, 3), textcoords="offset points")
    slo = search.get("slo_ttft_s")
    if isinstance(slo, int | float):
        ax.axvline(slo * 1e3, color="#555555", linestyle=":", linewidth=1.2, label="TTFT SLO")
    if _wide_range(p["ttft_s"] for s in drawn for p in _probes(s.result)):
        ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    _style(
        ax,
        "Throughput against TTFT, every probe of the SLO search",
        f"TTFT {name} (ms)",
        "output tokens/s",
    )
    ax.legend(fontsize=10, title="filled: met the SLO · label: the load", title_fontsize=9)
    return _png(figure)


PLOTTERS: dict[str, Callable[[list[Series]], bytes | None]] = {
    "throughput": throughput_plot,
    "decode_fit": decode_fit_plot,
    "latency": latency_plot,
    "prefill": prefill_plot,
    "cost": cost_plot,
    "quality": quality_plot,
    "slo": slo_plot,  # drawn only when a report shows it (not in PLOT_KEYS: most runs have none)
}


def render_plots(series: list[Series], keys: Iterable[str] = PLOT_KEYS) -> dict[str, bytes]:
    """The plots asked for that the data allows, by key; one whose data is absent is not drawn."""
    wanted = set(keys)
    images = {}
    for key, plotter in PLOTTERS.items():
        if key not in wanted:
            continue
        png = plotter(series)
        if png is not None:
            images[key] = png
    return images
