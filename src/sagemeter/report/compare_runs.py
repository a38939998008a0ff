"""Two run folders side by side (say L4 against T4, or two engine versions).

Absolute figures from different methods do not compare; ratios within each run do. So the page
leads with every difference of method or settings it can find and, when there is one, says what
the article says of its cross-platform rows: read the rows as a shape.
"""

from __future__ import annotations

from typing import Any

from sagemeter.compare.costs import cost_per_million_tokens
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
from sagemeter.report.figures import NA, hardware_of, money_per_hour, num, ratio, region_of
from sagemeter.report.rows import incomplete_notes, levels_of, name_of, noise_of
from sagemeter.report.runs import Run
from sagemeter.report.sections import scope_section
from sagemeter.results import MeasureResult

SHAPE_ADVICE = (
    "Read the rows as a shape: compare the ratios within each run, not the absolute figures "
    "across runs."
)


def _environment_values(run: Run, key: str) -> set[str]:
    values = set()
    for result in run.results:
        env = result.detail.environment if result.detail else None
        value = getattr(env, key, None) if env else None
        values.add(NA if value in (None, "") else str(value))
    return values


def _settings(run: Run) -> dict[str, Any] | None:
    detailed = [r.detail.settings for r in run.results if r.detail]
    return detailed[0] if len(detailed) == len(run.results) else None


def method_differences(a: Run, b: Run) -> list[str]:
    """Every difference of method, settings, engine or place between two runs that we can see."""
    found = []
    for run in (a, b):
        if any(r.detail is None for r in run.results):
            found.append(
                f"{run.label}: the files do not record their settings, engine or hardware, "
                "so its method is unknown"
            )
    settings_a, settings_b = _settings(a), _settings(b)
    if settings_a is not None and settings_b is not None:
        changed = [
            f"{key} {settings_a.get(key)!r} vs {settings_b.get(key)!r}"
            for key in sorted(set(settings_a) | set(settings_b))
            if settings_a.get(key) != settings_b.get(key)
        ]
        if changed:
            found.append("settings differ: " + "; ".join(changed))
    for key, title in (
        ("engine", "engine"),
        ("engine_version", "engine version"),
        ("backend", "backend"),
        ("host_cpu", "client machine"),
    ):
        values_a, values_b = _environment_values(a, key), _environment_values(b, key)
        if NA not in values_a | values_b and values_a != values_b:
            found.append(f"{title}: {', '.join(sorted(values_a))} vs {', '.join(sorted(values_b))}")
    regions_a = {region_of(r) for r in a.results}
    regions_b = {region_of(r) for r in b.results}
    if NA not in regions_a | regions_b and regions_a != regions_b:
        found.append(f"place: {', '.join(sorted(regions_a))} vs {', '.join(sorted(regions_b))}")
    if [name_of(r) for r in a.contenders] != [name_of(r) for r in b.contenders]:
        found.append("the checkpoints compared have different names; rows are paired by position")
    return found


def build_compare_document(a: Run, b: Run) -> Document:
    differences = method_differences(a, b)
    return Document(
        title=f"sagemeter: {a.label} vs {b.label}",
        lede=[
            f"Two run folders side by side: `{a.label}` "
            f"({' vs '.join(name_of(r) for r in a.contenders)}) and `{b.label}` "
            f"({' vs '.join(name_of(r) for r in b.contenders)})."
        ],
        sections=[
            _runs_section(a, b, differences),
            _side_by_side_section(a, b),
            _shape_section(a, b),
            _scope_section(a, b),
        ],
    )


def _runs_section(a: Run, b: Run, differences: list[str]) -> Section:
    blocks: list[Block] = []
    if differences:
        blocks.append(
            Callout(
                "The two runs differ in method or settings ("
                + "; ".join(differences)
                + "). "
                + SHAPE_ADVICE
            )
        )
    else:
        blocks.append(
            Paragraph("No difference of method or settings was found between the two runs.")
        )
    blocks += [Callout(f"{run.label}: {note}") for run in (a, b) for note in incomplete_notes(run)]

    def facts(run: Run) -> list[str]:
        settings = _settings(run)
        dates = sorted(
            {r.detail.environment.started_utc[:10] for r in run.results if r.detail} or {NA}
        )
        drift = noise_of(run)
        return [
            " → ".join(name_of(r) for r in run.results),
            ", ".join(sorted(_environment_values(run, "engine"))),
            ", ".join(sorted(_environment_values(run, "engine_version"))),
            ", ".join(sorted({region_of(r) for r in run.results})),
            ", ".join(sorted({hardware_of(r) for r in run.results})),
            ", ".join(dates),
            _settings_text(settings),
            NA if drift is None else f"{drift:.2%}",
            NA if run.price_per_hour is None else money_per_hour(run.price_per_hour),
        ]

    titles = [
        "Runs, in order",
        "Engine",
        "Engine version",
        "Region",
        "Measured from (CPU, cores)",
        "Dates",
        "Settings",
        "Largest A–A′ drift",
        "Price per hour",
    ]
    rows = [
        [label(title), label(x), label(y)]
        for title, x, y in zip(titles, facts(a), facts(b), strict=True)
    ]
    blocks.append(Table(header=["", a.label, b.label], rows=rows))
    return Section("The two runs", "runs", blocks)


def _settings_text(settings: dict[str, Any] | None) -> str:
    if settings is None:
        return NA
    levels = ",".join(str(x) for x in settings.get("load_levels", []))
    return (
        f"decode {settings.get('decode_repeats')}× {settings.get('short_tokens')}/"
        f"{settings.get('long_tokens')} tokens; parallel {levels} at once × "
        f"{settings.get('load_batches')} batch(es) of {settings.get('load_max_tokens')} tokens; "
        f"questions {settings.get('questions')}" + _prompt_settings_text(settings)
    )


def _prompt_settings_text(settings: dict[str, Any]) -> str:
    """The prefill lengths and long-prompt levels, when the run measured them."""
    lengths = settings.get("prefill_tokens") or []
    if not lengths:
        return ""
    text = f"; prefill {'/'.join(str(x) for x in lengths)} prompt tokens"
    levels = settings.get("long_prompt_levels") or []
    if levels:
        text += f", long prompts {','.join(str(x) for x in levels)} at once"
    return text


def _figures(run: Run, levels: list[str]) -> list[tuple[str, list[float | None], bool]]:
    """(title, one value per contender, money?) for every figure the side-by-side shows."""
    contenders = run.contenders
    rows: list[tuple[str, list[float | None], bool]] = [
        ("Decode (tokens/s)", [r.decode_tokens_per_second for r in contenders], False)
    ]
    for level in levels:
        values = [r.load_tokens_per_second.get(level) for r in contenders]
        rows.append((f"{level} at once (tokens/s)", values, False))
    rows += _prompt_figures(contenders)
    rows.append(("Weights (GiB)", [r.weights_gib for r in contenders], False))
    rows.append(("Checked answers (share)", [_share(r) for r in contenders], False))
    if run.price_per_hour:
        for level in levels:
            values = [
                cost_per_million_tokens(run.price_per_hour, tps)
                if (tps := r.load_tokens_per_second.get(level))
                else None
                for r in contenders
            ]
            rows.append((f"$/M tokens at {level}", values, True))
    return rows


def _prompt_figures(contenders: list[MeasureResult]) -> list[tuple[str, list[float | None], bool]]:
    """The prefill rate, the first token at the long prompt and long prompts under load, when a
    file of the run measured them (a run without them shows no such rows of its own)."""
    rows: list[tuple[str, list[float | None], bool]] = []
    if any(r.detail and r.detail.prefill for r in contenders):
        rows += [
            ("Prefill (prompt tokens/s)", [r.prefill_tokens_per_second for r in contenders], False),
            (
                "Time to first token, long prompt (ms)",
                [r.ttft_long_prompt_ms for r in contenders],
                False,
            ),
        ]
    levels = sorted(
        {level for r in contenders for level in r.long_prompt_tokens_per_second}, key=int
    )
    for level in levels:
        values = [r.long_prompt_tokens_per_second.get(level) for r in contenders]
        rows.append((f"{level} at once, long prompts (tokens/s)", values, False))
        values = [r.long_prompt_ttft_p50_ms.get(level) for r in contenders]
        rows.append((f"{level} at once, long prompts: TTFT p50 (ms)", values, False))
    return rows


def _share(result: MeasureResult) -> float | None:
    counts = result.quality_counts()
    return counts[0] / counts[1] if counts and counts[1] else None


def _side_by_side_section(a: Run, b: Run) -> Section:
    levels = levels_of(a.contenders + b.contenders)
    figures_a = {title: (values, money) for title, values, money in _figures(a, levels)}
    figures_b = {title: (values, money) for title, values, money in _figures(b, levels)}
    titles = list(figures_a) + [t for t in figures_b if t not in figures_a]
    width_a, width_b = len(a.contenders), len(b.contenders)
    header = [
        "",
        *(f"{a.label}: {name_of(r)}" for r in a.contenders),
        f"{a.label}: last / first",
        *(f"{b.label}: {name_of(r)}" for r in b.contenders),
        f"{b.label}: last / first",
    ]
    rows = []
    for title in titles:
        row: list[Cell] = [label(title)]
        for figures, width in ((figures_a, width_a), (figures_b, width_b)):
            values, money = figures.get(title, ([None] * width, False))
            row += [cell(num(v, money=money)) for v in values]
            row.append(cell(ratio(values[-1], values[0]) if width > 1 else NA))
        rows.append(row)
    blocks: list[Block] = [
        Table(header=header, rows=rows),
        Figure("throughput", "Throughput against requests at once, both runs."),
        Figure("prefill", "Time to first token against prompt length, both runs."),
        Figure("quality", "Checked answers per family, both runs, with 95% intervals."),
        Figure("cost", "Cost per million output tokens, where a price is known."),
    ]
    return Section("Side by side", "side-by-side", blocks)


def _shape_section(a: Run, b: Run) -> Section:
    levels = levels_of(a.contenders + b.contenders)
    figures_a = {title: values for title, values, _ in _figures(a, levels)}
    figures_b = {title: values for title, values, _ in _figures(b, levels)}
    rows = []
    for title in [t for t in figures_a if t in figures_b]:
        values_a, values_b = figures_a[title], figures_b[title]
        ratio_a = _last_over_first(values_a)
        ratio_b = _last_over_first(values_b)
        rows.append(
            [
                label(title),
                cell(NA if ratio_a is None else f"{ratio_a:.2f}"),
                cell(NA if ratio_b is None else f"{ratio_b:.2f}"),
                cell(ratio(ratio_b, ratio_a)),
            ]
        )
    blocks: list[Block] = [
        Paragraph(
            "The ratio of the last checkpoint to the first within each run, and how the second "
            "run's ratio compares with the first's (1.00 = the same shape)."
        ),
        Table(
            header=["Figure", f"{a.label} ratio", f"{b.label} ratio", "ratio of ratios"], rows=rows
        ),
    ]
    return Section("Ratios as a shape", "shape", blocks)


def _last_over_first(values: list[float | None]) -> float | None:
    if len(values) < 2 or values[0] is None or values[-1] is None or values[0] == 0:
        return None
    return values[-1] / values[0]


def _scope_section(a: Run, b: Run) -> Section:
    blocks: list[Block] = []
    for run in (a, b):
        lists = [block for block in scope_section(run).blocks if isinstance(block, Bullets)]
        measured, not_measured = lists[0], lists[1]
        blocks += [
            Paragraph(f"`{run.label}` measured:"),
            measured,
            Paragraph("and did not measure:"),
            not_measured,
        ]
    return Section("Scope", "scope", blocks)
