"""The quality verdict in the report: the paired figures, the per-family table, the decision.

Every figure comes from `combine`'s quality checks (`sagemeter.evidence`); this module only lays
them out, so the report says exactly what `sagemeter combine` prints.
"""

from __future__ import annotations

from sagemeter.compare import QualityCheck, across_methods_note
from sagemeter.evidence import QualityComparison, QualityVerdict
from sagemeter.evidence.binomial import p_text
from sagemeter.report.document import (
    Block,
    Bullets,
    Callout,
    Cell,
    Paragraph,
    Table,
    cell,
    label,
)
from sagemeter.report.runs import Run


def verdict_blocks(run: Run) -> list[Block]:
    checks = run.comparison.quality_checks if run.comparison else []
    blocks: list[Block] = []
    for check in checks:
        blocks.append(
            Paragraph(
                f"Verdict for {check.candidate} against {check.reference} at a "
                f"{check.margin_points:g}-point margin (declared before the run): "
                f"{check.verdict}. {_reason(check)}"
            )
        )
        if note := across_methods_note(check):
            blocks.append(Callout(note[0].upper() + note[1:] + "."))
        if (sequential := check.sequential) is not None:
            blocks.append(
                Paragraph(
                    f"Questions were asked to both arms in blocks of {sequential.block} and "
                    f"{sequential.sentence} (looks "
                    f"{sequential.looks_taken} of {sequential.looks_planned}; "
                    f"{sequential.method}; nominal false PASS "
                    f"{sequential.nominal_false_pass:.1%}, false FAIL "
                    f"{sequential.nominal_false_fail:.1%})."
                )
            )
        if check.paired is not None and check.paired_verdict is not None:
            blocks += _paired_blocks(check, check.paired, check.paired_verdict)
        else:
            blocks += [Paragraph(line.strip()) for line in check.summary[2:]]
    return blocks


def _reason(check: QualityCheck) -> str:
    found = check.paired_verdict or check.counts_verdict
    return (found.reason[0].upper() + found.reason[1:] + ".") if found else ""


def _paired_blocks(
    check: QualityCheck, paired: QualityComparison, verdict: QualityVerdict
) -> list[Block]:
    a, b = check.reference, check.candidate
    difference = paired.difference
    rows: list[list[Cell]] = [
        [
            label(f"{a} correct"),
            _share(
                paired.accuracy_a.correct,
                paired.accuracy_a.total,
                paired.accuracy_a.low,
                paired.accuracy_a.high,
            ),
        ],
        [
            label(f"{b} correct"),
            _share(
                paired.accuracy_b.correct,
                paired.accuracy_b.total,
                paired.accuracy_b.low,
                paired.accuracy_b.high,
            ),
        ],
        [
            label(f"{b} − {a} (points)"),
            cell(
                f"{difference.estimate_points + 0.0:+.1f}",
                f"95% CI {difference.low_points:+.1f} to {difference.high_points:+.1f}, "
                f"clustered by {difference.families} families",
            ),
        ],
        [
            label("Flips"),
            cell(
                f"{len(paired.flips.losses)} lost, {len(paired.flips.gains)} gained",
                f"exact McNemar {p_text(paired.mcnemar_p)}",
            ),
        ],
        [
            label("Identical replies"),
            cell(f"{paired.agreement.identical_replies} / {paired.agreement.n}"),
        ],
    ]
    if paired.noise is not None:
        noise = paired.noise
        rows.append(
            [
                label(f"Noise floor ({a} vs {a} again)"),
                cell(
                    f"{len(noise.flips.losses) + len(noise.flips.gains)} flips",
                    f"on {noise.n} questions; "
                    f"{noise.agreement.identical_replies} replies identical",
                ),
            ]
        )
    rows += [
        [
            label("Questions to decide"),
            cell(f"{verdict.items_needed:,}", f"{verdict.power:.0%} power"),
        ],
        [
            label("Smallest drop this count detects"),
            cell(f"{verdict.detectable_drop_points:.1f} points", f"{verdict.power:.0%} power"),
        ],
    ]
    family_rows = [
        [
            label(row.family),
            cell(str(row.n)),
            cell(str(row.correct_a)),
            cell(str(row.correct_b)),
            cell(str(row.losses)),
            cell(str(row.gains)),
        ]
        for row in paired.families
    ]
    return [
        Table(header=["Paired on the same questions", ""], rows=rows),
        Table(header=["Family", "Questions", a, b, "Lost", "Gained"], rows=family_rows),
    ]


def _share(correct: int, total: int, low: float, high: float) -> Cell:
    return cell(f"{correct} / {total}", f"95% CI {low:.0%}–{high:.0%}")


def fidelity_blocks(run: Run) -> list[Block]:
    """Token-level fidelity (B forced along A's answers), when the run measured it."""
    checks = run.comparison.fidelity_checks if run.comparison else []
    blocks: list[Block] = []
    for check in checks:
        blocks.append(
            Paragraph(
                f"Token-level fidelity: {check.candidate} scored along {check.reference}'s own "
                f"answer tokens, top {check.comparison.top_k} logprobs at every position."
            )
        )
        blocks.append(Bullets(check.summary[1:]))
    return blocks
