"""The timed sections: decode speed, parallel requests, the A-B-A re-measure, price.

Every figure carries its spread where the files hold one; a win within the A-A' drift is no win.
"""

from __future__ import annotations

from sagemeter.compare import Drift
from sagemeter.compare.costs import cost_per_million_tokens
from sagemeter.figures import (
    figure_named,
    figures,
    level_figure_of,
    level_key,
    level_label,
    level_values,
    plugin_level_figures,
    value_of,
)
from sagemeter.figures.builtin import DECODE, PREDICTED, tokens_per_gb_read
from sagemeter.figures.builtin_levels import LOAD
from sagemeter.report.document import (
    Block,
    Callout,
    Cell,
    Figure,
    Paragraph,
    Section,
    Table,
    cell,
    label,
)
from sagemeter.report.figures import (
    NA,
    money_per_hour,
    num,
    pick_best,
    spread_note,
)
from sagemeter.report.rows import (
    COST_CAVEAT,
    batch_spread,
    batches_note,
    comparison_row,
    figure_row,
    incomplete_of,
    interval_note,
    latency_note,
    level_detail,
    levels_of,
    name_of,
    noise_of,
    ratio_header,
)
from sagemeter.report.runs import Run
from sagemeter.results import MeasureResult, Spread


def _decode_rows(run: Run, noise: float | None) -> list[list[Cell]]:
    incomplete = incomplete_of(run)
    contenders = run.contenders
    decodes = [r.detail.decode if r.detail else None for r in contenders]
    long_tokens = next((d.long_tokens for d in decodes if d), None)
    short_tokens = next((d.short_tokens for d in decodes if d), None)
    long_spreads = [d.long_reply_s if d else None for d in decodes]
    short_spreads = [d.short_reply_s if d else None for d in decodes]

    def stat(spreads: list[Spread | None], key: str) -> list[float | None]:
        return [getattr(s, key) if s else None for s in spreads]

    def rate_note(index: int) -> str:
        decode = decodes[index]
        if decode is None:
            return f"spread {NA}"
        engine = decode.engine_tokens_per_second
        engine_text = f"; engine's own {spread_note(engine)}" if engine else ""
        interval = interval_note(contenders[index], DECODE.key)
        interval_text = f"{interval}; " if interval else ""
        return (
            f"{interval_text}least squares {num(decode.least_squares_tokens_per_second)}"
            f"{engine_text}"
        )

    n_long = f"{long_tokens}-token reply" if long_tokens else "Long reply"
    n_short = f"{short_tokens}-token reply" if short_tokens else "Short reply"
    rows = [
        figure_row(
            "Decode (tokens/s)",
            [r.decode_tokens_per_second for r in contenders],
            [rate_note(i) for i in range(len(contenders))],
            higher=True,
            noise=noise,
            incomplete=incomplete,
            compared=comparison_row(run, DECODE.key),
        ),
        *_predicted_row(contenders),
        figure_row(
            f"{n_long}, fastest (s)",
            stat(long_spreads, "min"),
            higher=False,
            noise=noise,
            incomplete=incomplete,
        ),
        figure_row(
            f"{n_long}, median (s)",
            stat(long_spreads, "median"),
            [f"n={s.n}" if s else "" for s in long_spreads],
            higher=False,
            noise=noise,
            incomplete=incomplete,
        ),
        figure_row(
            f"{n_long}, slowest (s)",
            stat(long_spreads, "max"),
            higher=False,
            noise=noise,
            incomplete=incomplete,
        ),
        figure_row(
            f"{n_short}, median (s)",
            stat(short_spreads, "median"),
            [spread_note(s) if s else "" for s in short_spreads],
        ),
        figure_row(
            "Per-call fixed cost (s)",
            [r.per_call_fixed_cost_seconds for r in contenders],
        ),
    ]
    for title, key in (
        ("Time to first token", "ttft_s"),
        ("Inter-token latency", "inter_token_latency_s"),
        ("Time per output token", "time_per_output_token_s"),
    ):
        spreads: list[Spread | None] = [getattr(d, key) if d else None for d in decodes]
        rows.append(
            figure_row(
                f"{title}, median (ms)",
                stat(spreads, "median"),
                [spread_note(s, scale=1000, tails=True) for s in spreads],
                higher=False,
                noise=noise,
                incomplete=incomplete,
                scale=1000,
            )
        )
    return rows + more_figure_rows(run, noise)


def more_figure_rows(run: Run, noise: float | None) -> list[list[Cell]]:
    """A row for each declared figure outside sagemeter's own tables (a plug-in's), where a
    result has a value; its winner marked by its declared better direction."""
    rows = []
    for figure in figures(["more"]):
        values = [value_of(result, figure) for result in run.contenders]
        if all(value is None for value in values):
            continue
        higher = {"higher": True, "lower": False}.get(figure.better)
        by_ratio = figure.compared == "ratio"
        row = figure_row(
            figure.label,
            values,
            higher=higher,
            noise=noise if figure.speed else None,
            incomplete=incomplete_of(run),
            with_ratio=by_ratio,
            compared=comparison_row(run, figure.key),
        )
        if not by_ratio:
            row += [_difference_cell(v, values[0], figure.compared) for v in values[1:]]
        rows.append(row)
    return rows + plugin_level_rows(run, noise)


def plugin_level_rows(run: Run, noise: float | None) -> list[list[Cell]]:
    """A row for each level of each plug-in's level family (sagemeter's own have tables of
    their own), where a result holds it; its winner marked by its declared better direction."""
    rows = []
    for family in plugin_level_figures():
        held = [level_values(result, family) for result in run.contenders]
        levels = list(dict.fromkeys(level for found in held for level in found))
        for level in levels if getattr(family, "named_levels", False) else sorted(levels, key=int):
            values = [found.get(level) for found in held]
            by_ratio = family.compared == "ratio"
            row = figure_row(
                level_label(family, level),
                values,
                higher={"higher": True, "lower": False}.get(family.better),
                noise=noise if family.speed else None,
                incomplete=incomplete_of(run),
                with_ratio=by_ratio,
                compared=comparison_row(run, level_key(family, level)),
            )
            if not by_ratio:
                row += [_difference_cell(v, values[0], family.compared) for v in values[1:]]
            rows.append(row)
    return rows


def _difference_cell(value: float | None, base: float | None, compared: str) -> Cell:
    """The ratio column of a figure compared by its difference (B − A), or left empty."""
    if compared != "difference":
        return label("")
    return cell(NA if value is None or base is None else f"{value - base:+.3g}")


def _predicted_row(contenders: list[MeasureResult]) -> list[list[Cell]]:
    """Beside the measured decode: tokens per GB the checkpoint's decode reads (its ratio is the
    predicted decode ratio), when the results carry their checkpoints' facts."""
    facts = [r.detail.environment.checkpoint_facts if r.detail else None for r in contenders]
    if not any(facts):
        return []
    notes = [
        f"reads {each.decode.bytes_per_token / 1e9:.3g} GB per token" if each else f"facts {NA}"
        for each in facts
    ]
    return [figure_row(PREDICTED.label, [tokens_per_gb_read(each) for each in facts], notes)]


def decode_section(run: Run) -> Section:
    contenders = run.contenders
    header = ["", *(name_of(r) for r in contenders), *ratio_header(contenders)]
    decodes = [r.detail.decode if r.detail else None for r in contenders]
    blocks: list[Block] = []
    known = next((d for d in decodes if d), None)
    if known:
        blocks.append(
            Paragraph(
                f"Fixed-length replies of {known.short_tokens} and {known.long_tokens} tokens "
                f"(ignore_eos, temperature 0), {known.repeats} of each, alternated. The rate is "
                f"({known.long_tokens} − {known.short_tokens}) / (median t({known.long_tokens}) "
                f"− median t({known.short_tokens})), which cancels what every call pays besides "
                "decoding; the per-call fixed cost is that remainder."
            )
        )
    else:
        blocks.append(Paragraph(f"Reply times are not in these files: their spreads are {NA}."))
    for result, decode in zip(contenders, decodes, strict=True):
        if decode and not decode.valid:
            problems = "; ".join(decode.problems) or "marked invalid"
            blocks.append(
                Callout(f"{name_of(result)}: decode gave no trustworthy rate ({problems})")
            )
        elif decode and decode.problems:  # the rate stands; what else was seen
            blocks.append(Callout(f"{name_of(result)}, decode: {'; '.join(decode.problems)}"))
        busy = result.detail.host.busy_note() if result.detail and result.detail.host else None
        if busy:
            blocks.append(Callout(f"{name_of(result)}: {busy}"))
    blocks.append(Table(header=header, rows=_decode_rows(run, noise_of(run))))
    blocks += _decode_verdict(contenders)
    blocks.append(
        Figure(
            "decode_fit",
            "Reply time against reply length; each line's slope is one over a decode rate. The "
            "thick line is the rate reported (through the medians of the short and long replies, "
            "so one slow reply does not move it); the dotted one is the least-squares fit through "
            "every reply, which slow replies pull, so the two differ when some replies were slow.",
        )
    )
    return Section("Decode speed", "decode", blocks)


def _decode_verdict(contenders: list[MeasureResult]) -> list[Block]:
    if len(contenders) < 2:
        return []
    rates = [r.decode_tokens_per_second for r in contenders]
    known = [(rate, r) for rate, r in zip(rates, contenders, strict=True) if rate is not None]
    if len(known) < 2:
        return []
    fast_rate, fast = max(known, key=lambda pair: pair[0])
    slow_rate, slow = min(known, key=lambda pair: pair[0])
    text = f"{name_of(fast)} decodes {fast_rate / slow_rate:.2f}× faster than {name_of(slow)}."
    fast_d = fast.detail.decode if fast.detail else None
    slow_d = slow.detail.decode if slow.detail else None
    if fast_d and slow_d and fast_d.long_times_s and slow_d.long_times_s:
        if max(fast_d.long_times_s) < min(slow_d.long_times_s):
            text += (
                f" The slowest {name_of(fast)} reply finished before the fastest {name_of(slow)} "
                "one, so the gap is larger than the spread between repeats."
            )
        else:
            text += (
                " The two ranges of long-reply times overlap: the gap is not larger than the "
                "spread between repeats."
            )
    return [Paragraph(text)]


def _level_note(result: MeasureResult, level: str) -> str:
    interval = interval_note(result, level_key(LOAD, level))
    return f"{interval}; {batches_note(result, level)}" if interval else batches_note(result, level)


LEVEL_RULES = {
    "pooled": "pools its batches (all tokens over all wall time)",
    "median": "takes the median of its batches' rates (the article's way)",
}


def _level_rule(results: list[MeasureResult]) -> str:
    """How each file made a level's figure from its batches, in one clause."""
    rules = {
        name_of(r): str(r.detail.settings.get("load_statistic", "pooled"))
        for r in results
        if r.detail
    }
    if len(set(rules.values())) <= 1:
        found = next(iter(rules.values()), "pooled")
        return f"a level {LEVEL_RULES.get(found, found)}"
    return "a level " + "; ".join(
        f"{LEVEL_RULES.get(rule, rule)} for {name}" for name, rule in rules.items()
    )


def parallel_section(run: Run) -> Section:
    contenders = run.contenders
    noise = noise_of(run)
    incomplete = incomplete_of(run)
    levels = levels_of(contenders)
    header = [
        "Requests at once",
        *(f"{name_of(r)} tokens/s" for r in contenders),
        *ratio_header(contenders),
    ]
    rows = [
        figure_row(
            level,
            [r.load_tokens_per_second.get(level) for r in contenders],
            [_level_note(r, level) for r in contenders],
            higher=True,
            noise=noise,
            incomplete=incomplete,
            compared=comparison_row(run, level_key(LOAD, level)),
        )
        for level in levels
    ]
    blocks: list[Block] = []
    load = next((r.detail.load for r in contenders if r.detail and r.detail.load), None)
    if load:
        blocks.append(
            Paragraph(
                f"{', '.join(levels)} requests at once, {load.max_tokens} tokens each, "
                f"{load.batches_per_level} batch(es) per level. A batch's throughput is its output "
                f"tokens over its wall time (first send to last byte); {_level_rule(contenders)}."
            )
        )
    blocks.append(Table(header=header, rows=rows))
    latency_header = [
        "Requests at once",
        *(f"{name_of(r)} TTFT ms" for r in contenders),
        *(f"{name_of(r)} inter-token ms" for r in contenders),
    ]
    latency_rows = []
    for level in levels:
        details = [level_detail(r, level) for r in contenders]
        ttft = [d.ttft_s if d else None for d in details]
        itl = [d.inter_token_latency_s if d else None for d in details]
        marks, _ = pick_best(
            [s.median if s else None for s in ttft],
            higher=False,
            noise=noise,
            incomplete=incomplete,
        )
        latency_rows.append(
            [
                label(level),
                *(
                    cell(num(s.median if s else None, scale=1000), latency_note(s), best=mark)
                    for s, mark in zip(ttft, marks, strict=True)
                ),
                *(cell(num(s.median if s else None, scale=1000), latency_note(s)) for s in itl),
            ]
        )
    blocks.append(
        Table(
            header=latency_header,
            rows=latency_rows,
            caption="Medians, with their spread, of time to first token and inter-token gaps.",
        )
    )
    failed = [
        f"{name_of(r)}: {r.detail.failed_requests} request(s) failed"
        for r in run.results
        if r.detail and r.detail.failed_requests
    ]
    blocks += [Callout(text) for text in failed]
    blocks.append(Figure("throughput", "Throughput against requests at once, every checkpoint."))
    blocks.append(Figure("latency", "Time to first token and inter-token latency."))
    return Section("Parallel requests", "parallel", blocks)


def aba_section(run: Run) -> Section:
    title, anchor = "Re-measured in A-B-A order", "aba"
    drift = run.comparison.drift if run.comparison else None
    if drift is None:
        return Section(
            title,
            anchor,
            [
                Paragraph(
                    "Not measured: this folder holds no re-measure of the first checkpoint after "
                    "the others, so how much of each ratio is drift between runs is unknown. "
                    "`sagemeter demo` measures in A-B-A order."
                )
            ],
        )
    results = run.results
    levels = levels_of(results)
    top = levels[-1] if levels else None
    header = ["Run", "Start (UTC)", "Decode tokens/s"]
    header += [f"{top} at once tokens/s"] if top else []
    header += ["Correct", "Weight load (s)"]
    rows = []
    for result in results:
        start = result.detail.environment.started_utc if result.detail else NA
        row = [label(name_of(result)), label(start), cell(num(result.decode_tokens_per_second))]
        if top:
            at_top = result.load_tokens_per_second.get(top)
            row.append(cell(num(at_top), batches_note(result, top)))
        row += [cell(result.quality or NA), cell(num(result.load_seconds))]
        rows.append(row)
    blocks: list[Block] = [Table(header=header, rows=rows), *_drift_blocks(drift, run)]
    return Section(title, anchor, blocks)


def _drift_blocks(drift: Drift, run: Run) -> list[Block]:
    first, last = run.results[0], run.results[-1]
    before = {DECODE.key: first.decode_tokens_per_second}
    after = {DECODE.key: last.decode_tokens_per_second}
    for level in levels_of([first, last]):
        before[level_key(LOAD, level)] = first.load_tokens_per_second.get(level)
        after[level_key(LOAD, level)] = last.load_tokens_per_second.get(level)
    changes = [
        (key, before.get(key), after.get(key), c) for key, c in drift.relative_change.items()
    ]
    if drift.figures:  # every figure of the comparison, not only the speed ones
        changes = [(f.key, f.first, f.last, f.change) for f in drift.figures]
    rows = [
        [
            label(_figure_title(key)),
            cell(num(first_value)),
            cell(num(last_value)),
            cell(NA if change is None else f"{change:+.2%}"),
        ]
        for key, first_value, last_value, change in changes
    ]
    worst = drift.max_abs_relative_change
    if worst is None:
        text = "No speed figure is known for both runs"
    elif worst <= 0.05:
        text = f"The two {drift.first} runs agree within {worst:.2%} on every speed figure"
    else:
        text = (
            f"The two {drift.first} runs differ by up to {worst:.2%} on the speed figures: the "
            "same checkpoint ran at a different speed, so the machine changed between runs"
        )
    if drift.identical_answers:
        text += f"; {drift.identical_answers} of their answers are identical"
    text += "."
    gaps = [
        abs(value - 1.0)
        for row in (run.comparison.rows if run.comparison else [])
        if row.kind == "speed"
        for value in row.ratios[:1]
        if value is not None
    ]
    if worst is not None and gaps:
        smallest = min(gaps)
        if smallest > 3 * worst:
            text += (
                f" The smallest A/B speed gap ({smallest:.1%}) is more than three times that "
                "drift, so the gap belongs to the checkpoint."
            )
        else:
            text += (
                f" The smallest A/B speed gap ({smallest:.1%}) is within three times that drift: "
                "read the ratios with care."
            )
    return [
        Table(
            header=["Figure", drift.first, drift.last, "change"],
            rows=rows,
            caption="A vs A′: the same checkpoint measured first and last.",
        ),
        Paragraph(text),
    ]


def _figure_title(key: str) -> str:
    if (declared := figure_named(key)) is not None:
        return declared.label
    found = level_figure_of(key)
    if found is not None and getattr(found[0], "priced_from", None) is None:
        return level_label(*found)  # a cost is priced, not held: its key says it
    return key  # a row no declaration titles (the predicted-decode rows)


def price_section(run: Run) -> Section:
    title, anchor = "Price/performance", "price"
    price = run.price_per_hour
    if price is None:
        return Section(
            title,
            anchor,
            [
                Paragraph(
                    "No price known: pass `--price-per-hour USD` to `sagemeter report` (or to "
                    "`sagemeter combine`, which records it in compare.json) to get the cost per "
                    "million output tokens at each concurrency."
                )
            ],
        )
    contenders = run.contenders
    rows = []
    for level in levels_of(contenders):
        values, notes = [], []
        for result in contenders:
            tps = result.load_tokens_per_second.get(level)
            values.append(cost_per_million_tokens(price, tps) if tps else None)
            spread = batch_spread(result, level)
            if spread and spread.min > 0:
                low = cost_per_million_tokens(price, spread.max)
                high = cost_per_million_tokens(price, spread.min)
                notes.append(f"batches ${low:.2f}–${high:.2f} (n={spread.n})")
            else:
                notes.append(f"spread {NA}")
        rows.append(
            figure_row(
                level,
                values,
                notes,
                higher=False,
                noise=noise_of(run),
                incomplete=incomplete_of(run),
                money=True,
            )
        )
    blocks: list[Block] = [
        Paragraph(
            f"At {money_per_hour(price)} an hour, per million output tokens: "
            "price / (tokens/s × 3600) × 10⁶, from the parallel throughput."
        ),
        Table(
            header=[
                "Requests at once",
                *(f"{name_of(r)} $/M" for r in contenders),
                *ratio_header(contenders),
            ],
            rows=rows,
        ),
        Paragraph(COST_CAVEAT),
        Figure("cost", "Cost per million output tokens at each concurrency."),
    ]
    return Section(title, anchor, blocks)
