"""From sources to facts: read each header, group by role, describe storage, count decode bytes.

Every source and the GPU are checked before any header is read, so a typo in the second source
fails at once rather than after the first one's range requests.
"""

from __future__ import annotations

from collections import defaultdict

from sagemeter.errors import UserError
from sagemeter.inspect.decode import decode_bytes, decode_ceiling, predicted_ratio
from sagemeter.inspect.gpus import Bandwidth, bandwidth_for
from sagemeter.inspect.grid import grid_check
from sagemeter.inspect.roles import BODY, ROLE_ORDER, role_of
from sagemeter.inspect.sources import Source, open_source, parse_source
from sagemeter.inspect.storage import describe_storage, quant_scheme
from sagemeter.inspect.table import TensorRecord, TensorTable
from sagemeter.results.checkpoint_facts import (
    CheckpointFacts,
    InspectReport,
    PredictedRatio,
    TensorGroup,
)


def facts_of(table: TensorTable, bandwidth: Bandwidth | None, check_grid: bool) -> CheckpointFacts:
    """The facts of one read header (see facts.CheckpointFacts)."""
    gguf = table.format == "gguf"
    roles = [role_of(record.name, gguf) for record in table.tensors]
    members: dict[str, list[TensorRecord]] = defaultdict(list)
    for record, role in zip(table.tensors, roles, strict=True):
        members[role].append(record)
    total = sum(record.nbytes for record in table.tensors)
    scheme = quant_scheme(table.config)
    groups = [
        TensorGroup(
            name=role,
            bytes=sum(r.nbytes for r in members[role]),
            share=round(sum(r.nbytes for r in members[role]) / total, 6) if total else 0.0,
            tensors=len(members[role]),
            dtypes=sorted({r.dtype for r in members[role]}),
            storage=describe_storage(members[role], scheme, gguf),
        )
        for role in ROLE_ORDER
        if members.get(role)
    ]
    decode = decode_bytes(table.tensors, roles, gguf)
    quantization = scheme.words() if scheme else None
    if gguf and table.config:
        quantization = f"GGUF file type {table.config.get('gguf_file_type')}"
    return CheckpointFacts(
        source=table.source,
        format=table.format,
        location=table.location,
        revision=table.revision,
        files=table.files,
        total_bytes=total,
        tensors=len(table.tensors),
        quantization=quantization,
        groups=groups,
        decode=decode,
        ceiling=decode_ceiling(decode, bandwidth) if bandwidth else None,
        grid_check=grid_check(members[BODY], table.reader) if check_grid else None,
        warnings=table.warnings,
        notes=table.notes,
    )


def inspect_sources(
    texts: list[str],
    *,
    gpu: str | None = None,
    bandwidth_gb_s: float | None = None,
    check_grid: bool = False,
) -> InspectReport:
    """Facts of every source, and each later one's predicted decode ratio against the first."""
    if not texts:
        raise UserError("give at least one source to inspect")
    bandwidth = bandwidth_for(gpu, bandwidth_gb_s)
    sources: list[Source] = [parse_source(text) for text in texts]
    checkpoints = [facts_of(open_source(source), bandwidth, check_grid) for source in sources]
    reference = checkpoints[0]
    ratios = [
        PredictedRatio(
            reference=reference.source, candidate=candidate.source, ratio=round(ratio, 4)
        )
        for candidate in checkpoints[1:]
        if (ratio := predicted_ratio(reference.decode, candidate.decode)) is not None
    ]
    return InspectReport(checkpoints=checkpoints, predicted_ratios=ratios)


def checkpoint_facts(source: str) -> CheckpointFacts:
    """One checkpoint's facts, for a result's environment (no GPU, no grid check)."""
    return facts_of(open_source(parse_source(source)), None, False)
