"""What one run's report says, section by section, in the source article's order.

What was compared → start-up facts → decode speed → parallel requests → answer quality → the
A-B-A re-measure → price/performance → "So, which one?" → scope. Every figure carries its spread
where the files hold one, and "n/a" where they do not.
"""

from __future__ import annotations

from sagemeter.report.answers import quality_section, which_one_section
from sagemeter.report.document import (
    Block,
    Bullets,
    Callout,
    Cell,
    Code,
    Document,
    Paragraph,
    Section,
    Table,
    cell,
    label,
)
from sagemeter.report.endpoint import endpoint_section
from sagemeter.report.figures import (
    NA,
    count,
    hardware_of,
    host_load_of,
    num,
    ratio,
    region_of,
    short_sha,
)
from sagemeter.report.predicted_decode import predicted_section
from sagemeter.report.prefill import prefill_section
from sagemeter.report.rows import (
    MINIMAL_NOTE,
    incomplete_notes,
    levels_of,
    method_label,
    name_of,
    ratio_cells,
    ratio_header,
    scoring_text,
)
from sagemeter.report.runs import Run, left_out_note
from sagemeter.report.slo import slo_section
from sagemeter.report.speed import aba_section, decode_section, parallel_section, price_section
from sagemeter.results import MeasureResult


def build_document(run: Run) -> Document:
    """The whole single-run report."""
    contenders = run.contenders
    prefill = prefill_section(run)
    endpoint = endpoint_section(run)
    predicted = predicted_section(run)
    slo = slo_section(run)
    return Document(
        title="sagemeter report: " + " vs ".join(name_of(r) for r in contenders),
        lede=lede(run),
        sections=[
            compared_section(run),
            startup_section(run),
            decode_section(run),
            *([predicted] if predicted else []),
            *([prefill] if prefill else []),
            parallel_section(run),
            *([endpoint] if endpoint else []),
            quality_section(run),
            aba_section(run),
            price_section(run),
            *([slo] if slo else []),
            which_one_section(run),
            scope_section(run),
        ],
    )


def lede(run: Run) -> list[str]:
    """The article's 'Result' line: the headline figures of the last contender against the first."""
    contenders = run.contenders
    lines = [f"Run folder `{run.label}`: {len(run.results)} result file(s), in run order."]
    if len(contenders) < 2:
        only = contenders[0]
        lines.append(
            f"{name_of(only)} decodes at {num(only.decode_tokens_per_second)} tokens/s; "
            "one checkpoint only, so nothing is compared."
        )
        return lines
    first, last = contenders[0], contenders[-1]
    parts = [
        f"{name_of(last)} decodes at {num(last.decode_tokens_per_second)} tokens/s against "
        f"{num(first.decode_tokens_per_second)} for {name_of(first)} "
        f"({ratio(last.decode_tokens_per_second, first.decode_tokens_per_second)}×)"
    ]
    levels = levels_of(contenders)
    if levels:
        top = levels[-1]
        a, b = first.load_tokens_per_second.get(top), last.load_tokens_per_second.get(top)
        parts.append(
            f"serves {num(b)} tokens/s at {top} requests at once against {num(a)} ({ratio(b, a)}×)"
        )
    parts.append(f"checked answers {last.quality or NA} against {first.quality or NA}")
    lines.append("; ".join(parts) + ".")
    return lines


def compared_section(run: Run) -> Section:
    results = run.results
    header = ["", *(f"{i}. {name_of(r)}" for i, r in enumerate(results, start=1))]

    def env_row(title: str, pick: object) -> list[Cell]:
        values = []
        for result in results:
            env = result.detail.environment if result.detail else None
            value = getattr(env, str(pick), None) if env else None
            values.append(label(NA if value in (None, "") else str(value)))
        return [label(title), *values]

    rows = [
        [label("Method"), *(label(method_label(r)) for r in results)],
        env_row("Model", "model"),
        env_row("Target", "target"),
        env_row("Checkpoint file", "checkpoint_file"),
        [
            label("Checkpoint SHA-256"),
            *(
                label(short_sha(r.detail.environment.checkpoint_sha256 if r.detail else None))
                for r in results
            ),
        ],
        [
            label("Bits per weight"),
            *(
                cell(num(r.detail.environment.checkpoint_bits_per_weight if r.detail else None))
                for r in results
            ),
        ],
        env_row("Engine", "engine"),
        env_row("Engine version", "engine_version"),
        env_row("Backend", "backend"),
        [label("Region"), *(label(region_of(r)) for r in results)],
        [label("Measured from (CPU, cores)"), *(label(hardware_of(r)) for r in results)],
        [label("Host while measuring"), *(label(host_load_of(r)) for r in results)],
        env_row("Platform", "platform"),
        env_row("Started (UTC)", "started_utc"),
        env_row("Ended (UTC)", "ended_utc"),
        env_row("sagemeter", "sagemeter_version"),
    ]
    blocks: list[Block] = []
    notes = incomplete_notes(run)
    warnings = run.comparison.warnings if run.comparison else []
    blocks += [Callout(text) for text in [*notes, *(w for w in warnings if w not in notes)]]
    minimal = [name_of(r) for r in results if r.detail is None]
    if minimal:
        blocks.append(Callout(f"{', '.join(minimal)} {MINIMAL_NOTE}"))
    order = " → ".join(name_of(r) for r in results)
    source = {
        "compare.json": "as recorded in compare.json",
        "journal.json": "as the run's journal.json names them: the run has no compare.json yet",
        "start times": "by start time",
        "file names": "by file name: no compare.json or start times say otherwise",
    }[run.order_source]
    blocks.append(Paragraph(f"Order of runs ({source}): {order}.{_experiment_order(run)}"))
    left_out = left_out_note(run)
    if left_out is not None:
        blocks.append(Paragraph(left_out[0].upper() + left_out[1:] + "."))
    blocks.append(Table(header=header, rows=rows))
    return Section("What was compared", "compared", blocks)


def _experiment_order(run: Run) -> str:
    """How `sagemeter run` ordered the measurements, when it made the folder."""
    if run.experiment_order is None:
        return ""
    if run.experiment_order == "interleaved":
        return (
            " Measured interleaved: every endpoint live at once, their requests sent in turn, "
            "so drift lands on each alike."
        )
    note = f" ({run.order_note})" if run.order_note else ""
    return f" Measured in the order {run.experiment_order}{note}, one endpoint at a time."


def startup_section(run: Run) -> Section:
    results = run.results
    contenders = run.contenders
    header = ["", *(name_of(r) for r in results), *ratio_header(contenders)]

    def row(title: str, values: list[float | None], integer: bool = False) -> list[Cell]:
        texts = [count(int(v)) if integer and v is not None else num(v) for v in values]
        return [
            label(title),
            *(cell(text) for text in texts),
            *ratio_cells(values[: len(contenders)]),
        ]

    def startup(result: MeasureResult, key: str) -> float | None:
        facts = result.detail.startup if result.detail else None
        value = getattr(facts, key, None) if facts else None
        return None if value is None else float(value)

    kv = [None if r.kv_cache_tokens is None else float(r.kv_cache_tokens) for r in results]
    rows = [
        row("Weights (GiB)", [r.weights_gib for r in results]),
        row("KV cache (tokens)", kv, integer=True),
        row("Weight load (s)", [r.load_seconds for r in results]),
        row("Max concurrency (×)", [startup(r, "max_concurrency") for r in results]),
    ]
    quant = [label("Quantization / file type")]
    quant += [
        label((r.detail.startup.quantization if r.detail and r.detail.startup else None) or NA)
        for r in results
    ]
    quant += [label("") for _ in contenders[1:]]
    rows.append(quant)
    blocks: list[Block] = [
        Paragraph(
            "What each engine says it allocated, from its own start-up log "
            "(one start per run, so these figures have no spread)."
        ),
        Table(header=header, rows=rows),
    ]
    lines = [
        f"[{name_of(r)}] {line}"
        for r in results
        if r.detail and r.detail.startup
        for line in r.detail.startup.lines
    ]
    if lines:
        blocks += [Paragraph("The log lines these facts come from:"), Code(lines)]
    return Section("Start-up facts", "startup", blocks)


def scope_section(run: Run) -> Section:
    results = run.results
    detailed = [r for r in results if r.detail]
    items: list[str] = []
    dates = sorted({r.detail.environment.started_utc[:10] for r in detailed if r.detail})
    engines = sorted(
        {
            " ".join(p for p in (env.engine, env.engine_version) if p)
            for r in detailed
            if r.detail and (env := r.detail.environment)
        }
        - {""}
    )
    items.append(
        f"{len(results)} run(s), in this order: "
        + ", ".join(name_of(r) for r in results)
        + (f"; on {', '.join(dates)}" if dates else f"; dates {NA}")
        + (f"; engine {', '.join(engines)}" if engines else f"; engine {NA}")
        + "."
    )
    settings = detailed[0].detail.settings if detailed and detailed[0].detail else None
    methods = sorted({method_label(r) for r in detailed})
    if methods:
        items.append(
            "Method: "
            + "; ".join(
                f"{', '.join(name_of(r) for r in detailed if method_label(r) == m)}: {m}"
                for m in methods
            )
            + ("." if len(methods) == 1 else "; figures across methods are marked as such.")
        )
    if settings:
        items += [
            f"Decode: {settings.get('decode_repeats')} replies of each length "
            f"({settings.get('short_tokens')} and {settings.get('long_tokens')} tokens) after "
            f"{settings.get('decode_warmup', 0)} unmeasured warm-up, temperature 0, ignore_eos.",
            f"Parallel requests: {', '.join(str(x) for x in settings.get('load_levels', []))} at "
            f"once, {settings.get('load_batches')} batch(es) per level, "
            f"{settings.get('load_max_tokens')} tokens each.",
        ]
    else:
        items.append(f"Repeat counts: {NA} (the files do not record their settings).")
    for result in detailed:
        decode = result.detail.decode if result.detail else None
        if decode is not None and decode.precision is not None:
            items.append(f"Decode of {name_of(result)}: {decode.precision.stopping_reason}.")
    quality = next((r.detail.quality for r in detailed if r.detail and r.detail.quality), None)
    counts = next((c for r in results if (c := r.quality_counts())), None)
    if quality:
        items.append(
            f"Answers: {quality.total} questions ({quality.question_set}), one at a time at "
            f"temperature 0, replies capped at {quality.max_tokens} tokens, scored "
            f"{scoring_text(quality.scoring)}."
        )
        if quality.sequential is not None:
            items.append(f"Answers: {quality.sequential.sentence}.")
    elif counts:
        items.append(f"Answers: {counts[1]} questions; the answers are not in the files.")
    failed = sum(r.detail.failed_requests for r in detailed if r.detail)
    if detailed:
        items.append(f"Failed requests across all runs: {failed}.")
    prefill_ran = any(r.detail.prefill for r in detailed if r.detail)
    if prefill_ran:
        items.append(
            "Prefill: two prompt lengths, one token each, every prompt unique; the same long "
            "prompt sent twice for the prefix cache."
        )
    long_load = next(
        (r.detail.long_prompt_load for r in detailed if r.detail and r.detail.long_prompt_load),
        None,
    )
    if long_load is not None:
        levels = ", ".join(str(level.concurrency) for level in long_load.levels)
        items.append(
            f"Long prompts under load: {levels} at once, each its own {long_load.prompt_tokens}-"
            f"token prompt, {long_load.batches_per_level} batch(es) per level, "
            f"{long_load.max_tokens} tokens each."
        )
    not_measured = [
        *(
            ["Long prompts under load (many long prompts at once) were not measured."]
            if prefill_ran and long_load is None
            else []
        ),
        *(
            []
            if prefill_ran
            else ["Prompts were short; long-prompt behaviour (prefill) was not measured."]
        ),
        "Only temperature 0; sampling at other temperatures was not measured.",
        "Every request came from one client process on one machine.",
    ]
    if not run.is_aba:
        not_measured.append("Drift between runs (A-B-A order) was not measured.")
    if run.price_per_hour is None:
        not_measured.append("Cost was not computed: no price per hour was given.")
    if any(r.detail is None for r in results):
        not_measured.append(f"Spreads and raw timings: {NA} for the files without `detail`.")
    blocks: list[Block] = [
        Paragraph("What was measured:"),
        Bullets(items),
        Paragraph("What was not:"),
        Bullets(not_measured),
    ]
    warnings = [w for r in detailed if r.detail for w in r.detail.warnings]
    if warnings and run.comparison is None:  # with a comparison they head the report already
        blocks += [Paragraph("Warnings the measurements recorded:"), Bullets(warnings)]
    return Section("Scope", "scope", blocks)
