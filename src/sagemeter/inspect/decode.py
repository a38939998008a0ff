"""The bytes one decoded token reads, and the decode ceiling a memory bandwidth allows.

At batch size one, decoding a token multiplies the activations by every weight of the transformer
body and by the output projection, and looks up one row of each embedding; the audio and vision
towers sit idle. Decode is bound by memory bandwidth, so bandwidth / those bytes is a ceiling
no single request can beat. The KV cache, activations and kernel overheads are not counted: real
decode runs below the ceiling, and a ratio of two ceilings is an upper estimate of the real ratio.
"""

from __future__ import annotations

from sagemeter.inspect.gpus import Bandwidth
from sagemeter.inspect.roles import (
    BODY,
    OTHER,
    PER_LAYER_EMBEDDING,
    VOCABULARY_EMBEDDING,
    is_input_embedding,
    is_output_projection,
    parts_of,
)
from sagemeter.inspect.table import TensorRecord
from sagemeter.results.checkpoint_facts import DecodeBytes, DecodeCeiling


def decode_bytes(tensors: list[TensorRecord], roles: list[str], gguf: bool) -> DecodeBytes:
    """Bytes read per decoded token, by part (see the module docstring)."""
    by_role: dict[str, list[TensorRecord]] = {}
    for record, role in zip(tensors, roles, strict=True):
        by_role.setdefault(role, []).append(record)
    body = sum(r.nbytes for r in by_role.get(BODY, []))
    other = sum(r.nbytes for r in by_role.get(OTHER, []))
    vocabulary = by_role.get(VOCABULARY_EMBEDDING, [])
    outputs = [r for r in vocabulary if is_output_projection(r.name, gguf)]
    inputs = [r for r in vocabulary if not is_output_projection(r.name, gguf)]
    notes: list[str] = []
    if outputs:
        output_projection, source = sum(r.nbytes for r in outputs), "lm_head"
        looked_up = inputs
    elif any(is_input_embedding(r.name) for r in inputs):
        output_projection, source = sum(r.nbytes for r in inputs), "the input embedding (tied)"
        looked_up = []
    else:
        output_projection, source = 0, "none found"
        looked_up = inputs
        notes.append("no output projection found: the logits' matrix is not counted")
    looked_up = looked_up + by_role.get(PER_LAYER_EMBEDDING, [])
    rows = sum(record.nbytes // record.rows for record in looked_up)
    if other:
        notes.append("tensors of no known role are counted as read in full every token")
    if any("experts" in parts_of(r.name) for r in by_role.get(BODY, [])):
        notes.append(
            "a mixture of experts reads only the routed experts per token; every expert is "
            "counted here, so the ceiling is an underestimate"
        )
    read = body + output_projection + rows + other
    total = sum(r.nbytes for r in tensors)
    return DecodeBytes(
        bytes_per_token=read,
        body=body,
        output_projection=output_projection,
        output_projection_from=source,
        embedding_rows=rows,
        other=other,
        not_read=total - read,
        notes=notes,
    )


def decode_ceiling(decode: DecodeBytes, bandwidth: Bandwidth) -> DecodeCeiling | None:
    """Bandwidth / bytes per token, or None for a checkpoint that reads nothing."""
    if decode.bytes_per_token <= 0:
        return None
    return DecodeCeiling(
        gpu=bandwidth.gpu,
        bandwidth_gb_s=bandwidth.gb_per_s,
        source=bandwidth.source,
        tokens_per_second=round(bandwidth.gb_per_s * 1e9 / decode.bytes_per_token, 1),
    )


def predicted_ratio(reference: DecodeBytes, candidate: DecodeBytes) -> float | None:
    """How much faster the candidate should decode: the reference's bytes / the candidate's."""
    if candidate.bytes_per_token <= 0 or reference.bytes_per_token <= 0:
        return None
    return reference.bytes_per_token / candidate.bytes_per_token
