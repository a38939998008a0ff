"""The load report's content: the runs, throughput against load, latency, timeline, operating
point, as plain blocks (rendered to markdown and HTML by the measure report's renderers)."""

from __future__ import annotations

from sagemeter.evidence.distribution import percentile
from sagemeter.loadgen.operating_point import at_percentile
from sagemeter.loadgen.result import LoadResult
from sagemeter.loadgen.sessions import SessionLoadResult
from sagemeter.report.document import (
    Block,
    Bullets,
    Callout,
    Cell,
    Document,
    Figure,
    Paragraph,
    Section,
    Table,
    cell,
    label,
)
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

NA = "n/a"


def ms(seconds: float | None) -> str:
    """Seconds as milliseconds with one decimal; an unknown figure is n/a."""
    return NA if seconds is None else f"{seconds * 1000:.1f}"


def rate(value: float | None) -> str:
    return NA if value is None else f"{value:.1f}"


def share(value: float | None) -> str:
    return NA if value is None else f"{value * 100:.0f}%"


def load_text(result: LoadResult) -> str:
    if result.asked_rate is not None:
        return f"Poisson {result.asked_rate:g} requests/s"
    return f"{result.asked_concurrency or result.settings.concurrency} at once (closed loop)"


def timeline_key(index: int) -> str:
    return f"load_timeline_{index}"


def _runs_section(runs: list[LoadRun]) -> Section:
    header = [
        "run",
        "load",
        "max tokens",
        "completed",
        "failed",
        "output tokens/s",
        "in flight (mean)",
        "valid",
    ]
    rows: list[list[Cell]] = []
    blocks: list[Block] = []
    for run in runs:
        r = run.result
        rows.append(
            [
                label(run.label),
                label(load_text(r)),
                cell(str(r.settings.max_tokens)),
                cell(str(r.requests_completed)),
                cell(str(r.requests_failed)),
                cell(rate(r.output_tokens_per_second), f"{r.window.rule}"),
                cell(f"{r.achieved_concurrency:.2f}"),
                label("yes" if r.valid else "no"),
            ]
        )
        for problem in r.problems:
            blocks.append(Callout(f"{run.label}: {problem}"))
        for why in r.invalid_because:
            blocks.append(Callout(f"{run.label} is not valid: {why}"))
    table = Table(header, rows, "Each run's figures over its steady window")
    targets = sorted({run.result.target for run in runs})
    models = sorted({run.result.settings.model or "?" for run in runs})
    facts = Bullets(
        [
            f"target: `{', '.join(targets)}`",
            f"model: `{', '.join(models)}`",
            *(
                f"{run.label}: started {run.result.started_utc}, "
                f"{run.result.settings.duration_s:g} s of sending, "
                f"`{run.result.settings.api}` API, sagemeter {run.result.sagemeter_version}"
                for run in runs
            ),
        ]
    )
    return Section("The runs", "runs", [facts, table, *blocks])


def _throughput_section(runs: list[LoadRun]) -> Section:
    header = [
        "run",
        "load",
        "output tokens/s",
        "TTFT (ms)",
        "TPOT (ms)",
        "goodput",
        "valid",
        "SLO met",
        "note",
    ]
    rows: list[list[Cell]] = []
    for run in runs:
        for point in throughput_points(run):
            load = (
                f"{point.load:g} requests/s"
                if point.load_kind == "rate"
                else f"{point.load:g} at once"
            )
            met = NA if point.passed is None else ("yes" if point.passed else "no")
            rows.append(
                [
                    label(run.label),
                    label(load),
                    cell(rate(point.output_tokens_per_second)),
                    cell(ms(point.ttft), point.ttft_label),
                    cell(ms(point.tpot), point.ttft_label),
                    cell(share(point.goodput_share)),
                    label("yes" if point.valid else "no"),
                    label(met),
                    label(point.note),
                ]
            )
    blocks: list[Block] = [
        Paragraph(
            "Each load a run tried: a sweep's levels, an operating-point search's probes "
            "(TTFT and TPOT at the SLO's percentile), or the one run (medians)."
        ),
        Table(header, rows, "Throughput against load"),
        Figure("load_throughput", "Output tokens/s against the load (requests at once or rate)"),
    ]
    return Section("Throughput against load", "throughput", blocks)


def _percentile_text(values: list[float], q: float) -> str:
    return ms(percentile(values, q)) if values else NA


def _latency_section(runs: list[LoadRun]) -> Section:
    header = ["run", "metric", "n", "p50 (ms)", "p90 (ms)", "p99 (ms)", "max (ms)", "from"]
    rows: list[list[Cell]] = []
    notes: list[str] = []
    for run in latency_runs(runs):
        found = latencies(run.result)
        if not found.from_raw:
            notes.append(
                f"{run.label}: run without `--raw`, so its curves are the percentiles the result "
                "carries (min, median, p90, p99, max), and end-to-end is not known"
            )
        for metric in METRICS:
            name = METRIC_NAMES[metric]
            if found.from_raw:
                values = found.samples[metric]
                rows.append(
                    [
                        label(run.label),
                        label(name),
                        cell(str(len(values))),
                        cell(_percentile_text(values, 50)),
                        cell(_percentile_text(values, 90)),
                        cell(_percentile_text(values, 99)),
                        cell(ms(values[-1]) if values else NA),
                        label("raw records"),
                    ]
                )
                continue
            dist = carried(run.result, metric)
            rows.append(
                [
                    label(run.label),
                    label(name),
                    cell(str(dist.n) if dist else NA),
                    cell(ms(dist.median) if dist else NA),
                    cell(ms(dist.p90) if dist else NA),
                    cell(ms(dist.p99) if dist else NA),
                    cell(ms(dist.max) if dist else NA),
                    label("result's percentiles" if dist else "not measured without --raw"),
                ]
            )
    blocks: list[Block] = [
        Paragraph(
            "Over the successful requests sent inside each run's steady window, as the result's "
            "own figures are. TTFT = first content event − send; TPOT = (last − first event) / "
            "(tokens − 1); ITL = every gap between events; end-to-end = end − send."
        ),
        Table(header, rows, "Latency percentiles"),
        *(Callout(note) for note in notes),
        Figure("load_latency_cdf", "Latency CDFs: TTFT, TPOT, ITL and end-to-end"),
    ]
    return Section("Latency", "latency", blocks)


def _timeline_section(runs: list[LoadRun]) -> Section:
    blocks: list[Block] = [
        Paragraph(
            "Requests in flight and requests ended per time bin over each run; the shaded span "
            "is the steady window the figures are measured over."
        )
    ]
    for index, run in enumerate(runs):
        line = timeline(run.result)
        if line is None:
            blocks.append(
                Paragraph(f"{run.label}: no timeline (run without `--raw`: no request times).")
            )
            continue
        blocks.append(
            Bullets(
                [
                    f"{run.label}: at most {line.peak_in_flight} requests in flight; "
                    f"{sum(line.completions)} ended well and {sum(line.failures)} failed; "
                    f"steady window {line.window[0]:.2f}–{line.window[1]:.2f} s"
                ]
            )
        )
        blocks.append(Figure(timeline_key(index), f"{run.label}: the run over time"))
    return Section("Timeline", "timeline", blocks)


def _operating_point_section(runs: list[LoadRun]) -> Section | None:
    searched = [run for run in runs if run.result.slo_search is not None]
    if not searched:
        return None
    header = [
        "run",
        "SLO",
        "found",
        "load",
        "output tokens/s",
        "TTFT at pct (ms)",
        "TPOT at pct (ms)",
        "goodput",
        "$/M tokens",
    ]
    rows: list[list[Cell]] = []
    reasons: list[str] = []
    for run in searched:
        search = run.result.slo_search
        assert search is not None
        pct = search.percentile
        slo = ", ".join(
            part
            for part in (
                f"TTFT ≤ {ms(search.slo_ttft_s)} ms" if search.slo_ttft_s is not None else "",
                f"TPOT ≤ {ms(search.slo_tpot_s)} ms" if search.slo_tpot_s is not None else "",
            )
            if part
        )
        point = run.result.operating_point
        reasons.append(f"{run.label}: {search.reason}")
        if point is None:
            rows.append(
                [
                    label(run.label),
                    label(f"{slo} at p{pct:g}"),
                    label("no"),
                    *(cell(NA) for _ in range(6)),
                ]
            )
            continue
        load = (
            f"{point.rate:g} requests/s"
            if point.rate is not None
            else f"{point.concurrency} at once"
        )
        usd = point.usd_per_million_tokens
        rows.append(
            [
                label(run.label),
                label(f"{slo} at p{pct:g}"),
                label("yes"),
                label(load),
                cell(rate(point.output_tokens_per_second)),
                cell(ms(at_percentile(point.ttft_s, pct))),
                cell(ms(at_percentile(point.tpot_s, pct))),
                cell(share(point.goodput.share if point.goodput else None)),
                cell(
                    NA if usd is None else f"{usd:.2f}",
                    point.usd_per_million_tokens_why or "",
                ),
            ]
        )
    blocks: list[Block] = [
        Table(header, rows, "The largest load meeting every SLO"),
        Bullets(reasons),
        Paragraph("Every probe is a row of the throughput table above (SLO met: yes/no)."),
    ]
    return Section("Operating point", "operating-point", blocks)


def _turns_section(runs: list[LoadRun]) -> Section | None:
    header = [
        "run",
        "turn",
        "requests",
        "failed",
        "TTFT p50 (ms)",
        "TTFT p99 (ms)",
        "prompt tokens",
    ]
    rows: list[list[Cell]] = []
    facts: list[str] = []
    for run in runs:
        result = run.result
        if not isinstance(result, SessionLoadResult):
            continue
        figures = result.sessions
        facts.append(
            f"{run.label}: {figures.sessions} sessions at once, {figures.turns} turns each, "
            f"think time {figures.think_time}; {figures.sessions_completed} of "
            f"{figures.sessions_started} sessions had every turn answered"
        )
        for turn in figures.by_turn:
            prompt = turn.prompt_tokens_median
            rows.append(
                [
                    label(run.label),
                    label(str(turn.turn)),
                    cell(str(turn.requests)),
                    cell(str(turn.failed)),
                    cell(ms(turn.ttft_s.median)),
                    cell(ms(turn.ttft_s.p99)),
                    cell(NA if prompt is None else f"{prompt:g}"),
                ]
            )
        for name, dist in (
            ("first", figures.ttft_first_turn_s),
            ("later", figures.ttft_later_turns_s),
        ):
            rows.append(
                [
                    label(run.label),
                    label(name),
                    cell(str(dist.n)),
                    cell(""),
                    cell(ms(dist.median)),
                    cell(ms(dist.p99)),
                    cell(""),
                ]
            )
    if not rows:
        return None
    blocks: list[Block] = [
        Bullets(facts),
        Paragraph(
            "Each turn sends the conversation so far, so later turns carry longer prompts (the "
            "server's own count, median): TTFT by turn, over every answered turn."
        ),
        Table(header, rows, "TTFT by turn"),
    ]
    return Section("Turns", "turns", blocks)


def build_load_document(runs: list[LoadRun]) -> Document:
    """The whole load report for one result file (its levels) or a folder of them."""
    targets = sorted({run.result.target for run in runs})
    title = f"Load report: {targets[0]}" if len(targets) == 1 else "Load report"
    lede = [
        f"{len(runs)} run{'s' if len(runs) != 1 else ''} of `sagemeter load`: "
        + "; ".join(f"{run.label} ({load_text(run.result)})" for run in runs)
        + "."
    ]
    sections = [
        _runs_section(runs),
        _throughput_section(runs),
        _latency_section(runs),
        _timeline_section(runs),
    ]
    for extra in (_operating_point_section(runs), _turns_section(runs)):
        if extra is not None:
            sections.append(extra)
    return Document(title, lede, sections)
