"""The report's "Predicted beside measured" section: for SageMaker arms whose plan carried
`sagemaker recommend`'s prediction, the predicted decode ceiling and likely range beside the
measured decode, per instance type, with measured / ceiling.

Renders only: the prediction is in each result's environment (copied from the plan by
`sagemeter run`). Absent when no result carries one; a result without one says nothing.
"""

from __future__ import annotations

from sagemeter.report.document import Block, Callout, Cell, Paragraph, Section, Table, cell
from sagemeter.report.figures import NA, num
from sagemeter.report.rows import name_of
from sagemeter.report.runs import Run
from sagemeter.results.predicted_decode import PredictedBeside, compared

TITLE, ANCHOR = "Predicted beside measured decode (per instance type)", "predicted-decode"
HEADER = [
    "Arm",
    "Instance type",
    "Predicted ceiling (tok/s)",
    "Likely (tok/s)",
    "Measured decode (tok/s)",
    "Measured / ceiling",
    "Within likely",
]


def predicted_section(run: Run) -> Section | None:
    found = [(name_of(r), c) for r in run.results if (c := compared(r)) is not None]
    if not found:
        return None
    blocks: list[Block] = [
        Paragraph(
            "What `sagemeter sagemaker recommend` predicted for each arm's instance type when it "
            "wrote the plan, beside the decode measured there (one request at a time). The "
            "ceiling is the GPUs' memory bandwidth / the bytes a token reads, an upper bound; "
            "the likely range is the ceiling × the lowest and highest share known measurements "
            "reached. Measured / ceiling is computed from the two figures shown."
        ),
        Table(header=HEADER, rows=[_row(name, each) for name, each in found]),
    ]
    blocks += [Callout(f"{name}: {each.note}") for name, each in found if each.note]
    blocks += [
        Callout(
            f"{name}: measured {num(each.measured_tokens_per_second)} tok/s, above the "
            f"predicted ceiling of {num(each.ceiling_tokens_per_second)}: an upper bound cannot "
            "be passed, so the bandwidth or bytes per token it assumed are not what ran "
            "(another model or quantisation served, or speculative decoding)"
        )
        for name, each in found
        if each.measured_over_ceiling is not None and each.measured_over_ceiling > 1
    ]
    return Section(TITLE, ANCHOR, blocks)


def _row(name: str, each: PredictedBeside) -> list[Cell]:
    likely = each.likely_tokens_per_second
    within = NA if each.within_likely is None else ("yes" if each.within_likely else "no")
    return [
        cell(name),
        cell(each.placed_instance_type or NA),
        cell(num(each.ceiling_tokens_per_second)),
        cell(f"{num(likely[0])}–{num(likely[1])}" if likely else NA),
        cell(num(each.measured_tokens_per_second)),
        cell(NA if each.measured_over_ceiling is None else f"{each.measured_over_ceiling:.3f}"),
        cell(within),
    ]
