"""Checkpoint facts as text: the same words for the terminal and for the MCP tool's answer."""

from __future__ import annotations

from sagemeter.results.checkpoint_facts import CheckpointFacts, InspectReport

GROUP_COLUMNS = ("part of the checkpoint", "{unit}", "share", "tensors", "dtypes", "storage")


def unit_of(facts: CheckpointFacts) -> tuple[str, float]:
    """GB (as the article prints them) for checkpoints of a gigabyte or more, else MB."""
    return ("GB", 1e9) if facts.total_bytes >= 1e9 else ("MB", 1e6)


def amount(value: int, facts: CheckpointFacts) -> str:
    unit, scale = unit_of(facts)
    return f"{value / scale:.3f}" if unit == "GB" else f"{value / scale:.1f}"


def title(facts: CheckpointFacts) -> str:
    unit, _ = unit_of(facts)
    how = facts.quantization or "no quantization_config"
    revision = f" at {facts.revision[:12]}" if facts.revision else ""
    return (
        f"{facts.source}: {facts.tensors:,} tensors, {amount(facts.total_bytes, facts)} {unit} "
        f"({facts.format}; {how}){revision}"
    )


def group_header(facts: CheckpointFacts) -> list[str]:
    unit, _ = unit_of(facts)
    return [column.format(unit=unit) for column in GROUP_COLUMNS]


def group_rows(facts: CheckpointFacts) -> list[list[str]]:
    return [
        [
            group.name,
            amount(group.bytes, facts),
            f"{group.share:.1%}",
            f"{group.tensors:,}",
            ", ".join(group.dtypes),
            group.storage,
        ]
        for group in facts.groups
    ]


def decode_line(facts: CheckpointFacts) -> str:
    decode = facts.decode
    unit, _ = unit_of(facts)
    parts = [f"body {amount(decode.body, facts)}"]
    parts.append(
        f"output projection {amount(decode.output_projection, facts)} "
        f"({decode.output_projection_from})"
    )
    if decode.embedding_rows:
        _, scale = unit_of(facts)
        rows = decode.embedding_rows
        shown = f"{rows / 1e3:.1f} KB" if rows < scale / 1000 else amount(rows, facts)
        parts.append(f"one row of each embedding {shown}")
    if decode.other:
        parts.append(f"other {amount(decode.other, facts)}")
    return (
        f"read per decoded token: {amount(decode.bytes_per_token, facts)} {unit} = "
        + " + ".join(parts)
        + f"; not read: {amount(decode.not_read, facts)} {unit}"
    )


def ceiling_line(facts: CheckpointFacts) -> str | None:
    ceiling = facts.ceiling
    if ceiling is None:
        return None
    on = (
        f"{ceiling.gpu} ({ceiling.bandwidth_gb_s:g} GB/s)"
        if ceiling.gpu
        else (f"{ceiling.bandwidth_gb_s:g} GB/s")
    )
    return (
        f"decode ceiling on {on}: {ceiling.tokens_per_second:,.1f} tokens/s "
        f"(bandwidth / bytes per token; source: {ceiling.source})"
    )


def grid_line(facts: CheckpointFacts) -> str | None:
    check = facts.grid_check
    if check is None:
        return None
    if check.on_grid is None:
        return f"grid check: {check.status}: {check.reason}"
    levels = f"; median {check.levels_median:g} values per block" if check.levels_median else ""
    return (
        f"grid check: {check.status}: {check.blocks_on_grid}/{check.blocks_checked} sampled "
        f"blocks of {check.block_size} from {len(check.tensors_sampled)} body weights{levels}; "
        f"{check.bytes_read:,} bytes read"
    )


def facts_lines(facts: CheckpointFacts) -> list[str]:
    """Everything but the group table, one line each."""
    lines = [f"note: {note}" for note in facts.notes]
    lines.append(decode_line(facts))
    lines.extend(f"  note: {note}" for note in facts.decode.notes)
    for line in (ceiling_line(facts), grid_line(facts)):
        if line:
            lines.append(line)
    lines.extend(f"warning: {warning}" for warning in facts.warnings)
    return lines


def ratio_lines(report: InspectReport) -> list[str]:
    return [
        f"predicted decode ratio {ratio.candidate} / {ratio.reference}: {ratio.ratio:.2f} "
        f"({ratio.reference} reads {ratio.ratio:.2f}× the bytes per token; a ceiling's ratio: "
        "measured decode ratios come out lower)"
        for ratio in report.predicted_ratios
    ]


def report_text(report: InspectReport) -> str:
    """The whole report as plain text, the group table in aligned columns."""
    blocks = []
    for facts in report.checkpoints:
        table = [group_header(facts), *group_rows(facts)]
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
        rows = [
            "  "
            + "  ".join(
                cell.ljust(width) if i in (0, 4) else cell.rjust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=False))
            )
            + "  "
            + row[-1]
            for row in table
        ]
        blocks.append(
            "\n".join([title(facts), *rows, *(f"  {line}" for line in facts_lines(facts))])
        )
    blocks.extend(ratio_lines(report))
    return "\n".join(blocks)
