"""The answers section (per family, with Wilson intervals, misses side by side) and the verdict:
"So, which one?", the winner of each row marked.
"""

from __future__ import annotations

from sagemeter.compare.costs import cost_per_million_tokens
from sagemeter.figures import level_key
from sagemeter.figures.builtin import DECODE, TTFT
from sagemeter.figures.builtin_levels import LOAD
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
from sagemeter.report.figures import (
    NA,
    num,
    pick_best,
    quality_shares,
    truncate,
)
from sagemeter.report.rows import incomplete_of, levels_of, name_of, noise_of, scoring_text
from sagemeter.report.runs import Run
from sagemeter.report.verdict import fidelity_blocks, verdict_blocks
from sagemeter.results import MeasureResult, QualityItem, Share

MAX_MISSES_SHOWN = 60


def interval_note(found: Share) -> str:
    return f"95% CI {found.low:.0%}–{found.high:.0%}"


def quality_section(run: Run) -> Section:
    contenders = run.contenders
    per_result = [quality_shares(r) for r in contenders]
    families: list[str] = []
    for counts in per_result:
        families += [f for f in counts if f not in families and f != "Total"]
    families.append("Total")
    rows = []
    for family in families:
        sizes = {counts[family].total for counts in per_result if family in counts}
        size = f" ({sizes.pop()})" if len(sizes) == 1 else ""
        row = [label(f"{family}{size}")]
        for counts in per_result:
            if family in counts:
                found = counts[family]
                row.append(cell(f"{found.correct} / {found.total}", interval_note(found)))
            else:
                row.append(cell(NA))
        rows.append(row)
    rules = sorted({r.detail.quality.scoring for r in contenders if r.detail and r.detail.quality})
    scored = " and ".join(scoring_text(rule) for rule in rules) or "strictly"
    blocks: list[Block] = [
        Paragraph(
            "Fixed questions with exact answers, asked one at a time at temperature 0 and scored "
            f"{scored}; each count with its Wilson 95% interval."
        ),
        Table(header=["Questions", *(name_of(r) for r in contenders)], rows=rows),
    ]
    if run.comparison and run.comparison.identical_answers:
        blocks.append(
            Paragraph(
                f"{run.comparison.identical_answers} answers are identical character for "
                f"character ({name_of(contenders[0])} vs {name_of(contenders[1])})."
            )
        )
    blocks += verdict_blocks(run)
    blocks += fidelity_blocks(run)
    blocks += _misses(contenders)
    blocks.append(Figure("quality", "Share correct per question family, with 95% intervals."))
    return Section("Answer quality", "quality", blocks)


def _misses(contenders: list[MeasureResult]) -> list[Block]:
    items = [
        {item.id: item for item in r.detail.quality.items}
        if r.detail and r.detail.quality
        else None
        for r in contenders
    ]
    if any(found is None for found in items):
        return [Paragraph(f"Misses side by side: {NA} (these files hold totals, not answers).")]
    tables = [found for found in items if found is not None]
    ids = [item_id for item_id in tables[0] if all(item_id in t for t in tables[1:])]
    missed = [i for i in ids if any(not t[i].correct for t in tables)]
    if not missed:
        return [Paragraph("Every run answered every shared question correctly.")]
    rows = []
    for item_id in missed[:MAX_MISSES_SHOWN]:
        first = tables[0][item_id]
        rows.append(
            [label(first.prompt), label(first.expected), *(_answer(t[item_id]) for t in tables)]
        )
    more = len(missed) - MAX_MISSES_SHOWN
    shown = f" (the first {MAX_MISSES_SHOWN} of {len(missed)}; every answer is in the result files)"
    return [
        Paragraph(
            "The questions that at least one run missed, side by side"
            + (shown if more > 0 else "")
            + ":"
        ),
        Table(header=["Question", "Expected", *(name_of(r) for r in contenders)], rows=rows),
    ]


def _answer(item: QualityItem) -> Cell:
    shown = item.extracted if item.extracted is not None else "—"
    note = item.error or truncate(item.reply or "")
    return Cell(text=shown, note=note, mark="ok" if item.correct else "miss")


def which_one_section(run: Run) -> Section:
    title, anchor = "So, which one?", "which-one"
    contenders = run.contenders
    if len(contenders) < 2:
        only = Paragraph("One checkpoint only: nothing to choose between.")
        return Section(title, anchor, [only])
    noise = noise_of(run)
    incomplete = incomplete_of(run)
    levels = levels_of(contenders)
    top = levels[-1] if levels else None
    rows: list[list[Cell]] = []
    wins = [0] * len(contenders)

    def add(
        name: str,
        values: list[float | None],
        texts: list[str],
        higher: bool,
        timed: bool = True,
        key: str | None = None,
    ) -> None:
        # Only timed figures drift between runs; a file size does not.
        marks, why = pick_best(
            values, higher=higher, noise=noise if timed else None, incomplete=incomplete
        )
        flag = _ratio_flag_of(run, key) if any(marks) else None
        if flag is not None:  # the comparison's own interval cannot tell it from no change
            marks, why = [False] * len(marks), f"no win: {flag}"
        rows.append(
            [
                label(name),
                *(cell(t, best=m) for t, m in zip(texts, marks, strict=True)),
                label(why or _ratio_why(values)),
            ]
        )
        for index, mark in enumerate(marks):
            wins[index] += mark

    rates = [r.decode_tokens_per_second for r in contenders]
    add("Decode speed", rates, [f"{num(v)} tokens/s" for v in rates], True, key=DECODE_KEY)
    if top:
        at_top = [r.load_tokens_per_second.get(top) for r in contenders]
        at_top_texts = [f"{num(v)} tokens/s" for v in at_top]
        add(f"{top} requests at once", at_top, at_top_texts, True, key=level_key(LOAD, top))
    weights = [r.weights_gib for r in contenders]
    add("Memory for weights", weights, [f"{num(v)} GiB" for v in weights], False, timed=False)
    ttft = [
        r.detail.decode.ttft_s.median
        if r.detail and r.detail.decode and r.detail.decode.ttft_s
        else None
        for r in contenders
    ]
    if any(v is not None for v in ttft):
        ttft_texts = [f"{num(v, scale=1000)} ms" for v in ttft]
        add("Time to first token", ttft, ttft_texts, False, key=TTFT.key)
    rows.append(_answers_row(contenders, wins))
    if run.price_per_hour and top:
        costs = [
            cost_per_million_tokens(run.price_per_hour, tps)
            if (tps := r.load_tokens_per_second.get(top))
            else None
            for r in contenders
        ]
        add(
            f"Cost per million tokens at {top}",
            costs,
            [NA if v is None else f"${v:.2f}" for v in costs],
            False,
        )
    blocks: list[Block] = [
        Paragraph(
            "The winner of each row is marked. A win smaller than the A–A′ drift, or a count "
            "whose 95% intervals overlap the other's, is no win."
        ),
        Table(header=["", *(name_of(r) for r in contenders), "why"], rows=rows),
        Paragraph(_verdict(contenders, wins, len(rows))),
    ]
    return Section(title, anchor, blocks)


DECODE_KEY = DECODE.key


def _ratio_flag_of(run: Run, key: str | None) -> str | None:
    """Why the comparison says its row's ratio (the second file against the first) tells
    nothing: its interval reaches 1 or the A-A' band, or the methods differ. None when it does
    tell, or when there is no such row (then the drift rule alone decides)."""
    if key is None or run.comparison is None or len(run.contenders) != 2:
        return None
    row = next((r for r in run.comparison.rows if r.key == key), None)
    if row is None or not row.ratio_flags:
        return None
    return row.ratio_flags[0]


def _ratio_why(values: list[float | None]) -> str:
    if len(values) != 2 or values[0] is None or values[1] is None or values[0] == 0:
        return ""
    return f"{values[1] / values[0]:.2f}×"


def _answers_row(contenders: list[MeasureResult], wins: list[int]) -> list[Cell]:
    counts = [r.quality_counts() for r in contenders]
    shares = [r.quality_interval for r in contenders]
    intervals = [(found.low, found.high) if found else None for found in shares]
    texts = [f"{c[0]} / {c[1]}" if c else NA for c in counts]
    marks = [False] * len(contenders)
    why = NA
    known = [(i, c) for i, c in enumerate(counts) if c]
    if len(known) >= 2:
        best_index, _ = max(known, key=lambda pair: pair[1][0] / max(pair[1][1], 1))
        others = [intervals[i] for i, _ in known if i != best_index]
        low_best = intervals[best_index]
        separated = low_best is not None and all(o and o[1] < low_best[0] for o in others)
        if separated:
            marks[best_index] = True
            wins[best_index] += 1
            why = "95% intervals do not overlap"
        elif len({c[0] for _, c in known}) == 1:
            why = "same count"
        else:
            why = "95% intervals overlap: no measured difference"
    return [
        label("Checked answers"),
        *(cell(t, best=m) for t, m in zip(texts, marks, strict=True)),
        label(why),
    ]


def _verdict(contenders: list[MeasureResult], wins: list[int], rows: int) -> str:
    best = max(range(len(contenders)), key=lambda i: wins[i])
    if wins[best] == 0:
        return "No row has a measured winner."
    tied = [i for i, w in enumerate(wins) if w == wins[best]]
    if len(tied) > 1:
        return "The rows split: " + ", ".join(
            f"{name_of(contenders[i])} wins {wins[i]}" for i in range(len(contenders))
        )
    total = sum(1 for c in contenders if c.quality_counts())
    answers = contenders[best].quality_counts()
    text = f"{name_of(contenders[best])} wins {wins[best]} of {rows} rows."
    if answers and total >= 2:
        text += (
            f" {answers[1]} questions are enough to show a large loss in answers and too few to "
            "measure a small one: keep the reference checkpoint where a task needs a larger "
            "evaluation."
        )
    return text
