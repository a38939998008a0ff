"""The load report's plots as PNG bytes, drawn the measure report's way (same size, palette,
canvas): throughput against load, latency CDFs, and each run's timeline."""

from __future__ import annotations

from sagemeter.report.load_figures import (
    METRIC_NAMES,
    METRICS,
    LoadRun,
    carried,
    latencies,
    latency_runs,
    throughput_points,
    timeline,
)
from sagemeter.report.load_sections import timeline_key
from sagemeter.report.plots import _new_figure, _png, _style, palette


def throughput_plot(runs: list[LoadRun]) -> bytes | None:
    """Tokens/s against load per run; a search's probes marked met (filled) or not (hollow)."""
    figure, (ax,) = _new_figure()
    kinds: set[str] = set()
    for index, run in enumerate(runs):
        points = sorted(throughput_points(run), key=lambda p: p.load)
        if not points:
            continue
        kinds.update(p.load_kind for p in points)
        color = palette(index)
        xs = [p.load for p in points]
        ys = [p.output_tokens_per_second for p in points]
        ax.plot(xs, ys, color=color, marker="o", label=run.label)
        missed = [p for p in points if p.passed is False or not p.valid]
        if missed:
            ax.scatter(
                [p.load for p in missed],
                [p.output_tokens_per_second for p in missed],
                s=90,
                facecolors="white",
                edgecolors=color,
                zorder=3,
                label=f"{run.label}: SLO missed or not valid",
            )
    if not kinds:
        return None
    xlabel = " / ".join(
        "requests at once" if kind == "concurrency" else "requests/s" for kind in sorted(kinds)
    )
    ax.set_ylim(bottom=0)
    _style(ax, "Throughput against load", xlabel, "output tokens/s")
    ax.legend(fontsize=9)
    return _png(figure)


def latency_cdf_plot(runs: list[LoadRun]) -> bytes | None:
    """One panel per metric: the raw CDF as a step line, or the carried percentiles as dots."""
    figure, axes = _new_figure(columns=len(METRICS))
    drawn = False
    for index, run in enumerate(latency_runs(runs)):
        found = latencies(run.result)
        color = palette(index)
        for ax, metric in zip(axes, METRICS, strict=True):
            if found.from_raw:
                values = found.samples[metric]
                if not values:
                    continue
                shares = [(i + 1) / len(values) for i in range(len(values))]
                ms_values = [v * 1000 for v in values]
                ax.step(ms_values, shares, where="post", color=color, label=run.label)
                drawn = True
                continue
            dist = carried(run.result, metric)
            if dist is None or dist.median is None:
                continue
            pairs = [(dist.min, 0.0), (dist.median, 0.5), (dist.p90, 0.9), (dist.p99, 0.99)]
            pairs.append((dist.max, 1.0))
            known = [(v * 1000, q) for v, q in pairs if v is not None]
            ax.plot(
                [v for v, _ in known],
                [q for _, q in known],
                color=color,
                linestyle="--",
                marker="o",
                label=f"{run.label} (percentiles only)",
            )
            drawn = True
    if not drawn:
        return None
    for ax, metric in zip(axes, METRICS, strict=True):
        _style(ax, METRIC_NAMES[metric], "ms", "share of requests" if metric == "ttft" else "")
        ax.set_ylim(0, 1.02)
        ax.tick_params(labelsize=8)
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        figure.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=9)
    return _png(figure)


def timeline_plot(run: LoadRun) -> bytes | None:
    """In flight (step line, left axis) and requests ended per second (bars, right axis)."""
    line = timeline(run.result)
    if line is None:
        return None
    figure, (ax,) = _new_figure()
    ax.axvspan(*line.window, color="#eeeeee", label="steady window")
    ax.step(line.times_s, line.in_flight, where="post", color=palette(0), label="in flight")
    ax.set_ylim(bottom=0)
    right = ax.twinx()
    per_s = [c / line.bin_s for c in line.completions]
    right.bar(
        line.bin_starts_s,
        per_s,
        width=line.bin_s,
        align="edge",
        color=palette(1),
        alpha=0.45,
        label="ended / s",
    )
    if any(line.failures):
        right.bar(
            line.bin_starts_s,
            [f / line.bin_s for f in line.failures],
            width=line.bin_s,
            align="edge",
            bottom=per_s,
            color=palette(3),
            alpha=0.7,
            label="failed / s",
        )
    right.set_ylabel("requests ended per second", fontsize=11)
    _style(ax, f"{run.label}: the run over time", "seconds since start", "requests in flight")
    handles, labels = ax.get_legend_handles_labels()
    more, more_labels = right.get_legend_handles_labels()
    figure.legend(
        handles + more, labels + more_labels, loc="outside lower center", ncols=4, fontsize=9
    )
    return _png(figure)


def render_load_plots(runs: list[LoadRun], shown: list[str]) -> dict[str, bytes]:
    """The plots the document shows, by key; a plot with nothing to draw is left out."""
    timelines = {timeline_key(index): run for index, run in enumerate(runs)}
    images: dict[str, bytes] = {}
    for key in shown:
        png: bytes | None = None
        if key == "load_throughput":
            png = throughput_plot(runs)
        elif key == "load_latency_cdf":
            png = latency_cdf_plot(runs)
        elif key in timelines:
            png = timeline_plot(timelines[key])
        if png is not None:
            images[key] = png
    return images
