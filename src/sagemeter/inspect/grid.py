"""Whether a 16- or 32-bit checkpoint's body holds 4-bit weights: the QAT-export check.

A checkpoint trained for 4-bit and stored wider (Gemma's `-q4_0-unquantized`, or a GGUF's
dequantized copy) keeps every block of 32 weights on a 4-bit grid: at most 16 distinct values,
evenly spaced (`scale × q`, or `min + scale × q`, with q in 0..15). Ordinary 16-bit weights put
nearly 32 distinct values in a block. Sampled blocks are read by byte range, never the whole file.
"""

from __future__ import annotations

import random

import numpy as np

from sagemeter.inspect.table import RangeReader, TensorRecord
from sagemeter.results.checkpoint_facts import GridCheck

BLOCK = 32
LEVELS = 16
# How far (in grid steps) a value may sit from its grid point: BF16 rounds d × q by up to 2^-9
# of its size, under 0.02 of a step for |q| <= 8. Ordinary weights fail sooner: a block of them
# holds about 32 distinct values.
TOLERANCE = 0.1
ITEM_BYTES = {"F32": 4, "F16": 2, "BF16": 2}
PACKED_DTYPES = ("Q", "IQ", "TQ", "MXFP")  # GGUF's quantized block types
ON_GRID = "on a 4-bit grid"
OFF_GRID = "off the grid"
NOT_APPLICABLE = "not applicable"


def block_on_grid(values: np.ndarray) -> tuple[bool, int]:
    """(on the grid, distinct values) for one block of weights.

    The grid's step is (max - min) / k for the smallest k in 1..15 that puts every value within
    TOLERANCE of a grid point: measured over the whole span, a 16-bit rounding of the ends moves
    it far less than it moves the gap between two neighbours.
    """
    levels = np.unique(values.astype(np.float64))
    if len(levels) > LEVELS:
        return False, len(levels)
    if len(levels) <= 2:
        return True, len(levels)
    offsets = levels - levels[0]
    span = offsets[-1]
    for steps in range(len(levels) - 1, LEVELS):
        position = offsets * steps / span
        if np.all(np.abs(position - np.round(position)) <= TOLERANCE):
            return True, len(levels)
    return False, len(levels)


def decode_values(raw: bytes, dtype: str) -> np.ndarray:
    if dtype == "BF16":
        halves = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return halves.view(np.float32)
    return np.frombuffer(raw, dtype="<f4" if dtype == "F32" else "<f2")


def candidates(tensors: list[TensorRecord]) -> list[TensorRecord]:
    """The body's 2-D weights stored as plain floats whose rows split into whole blocks."""
    return [
        record
        for record in tensors
        if record.dtype in ITEM_BYTES
        and len(record.shape) == 2
        and record.shape[1] % BLOCK == 0
        and record.name.endswith("weight")
    ]


def grid_check(
    body: list[TensorRecord],
    reader: RangeReader,
    *,
    tensors: int = 8,
    rows: int = 4,
    blocks_per_row: int = 4,
    seed: int = 0,
) -> GridCheck:
    """Sample `rows` rows of up to `tensors` body weights and test `blocks_per_row` blocks each."""
    usable = candidates(body)
    if not usable:
        packed = any(
            r.name.endswith(("weight_packed", "qweight")) or r.dtype.startswith(PACKED_DTYPES)
            for r in body
        )
        reason = (
            "the body is stored packed: its weights are on a low-bit grid by construction"
            if packed
            else "no 2-D F32/F16/BF16 body weights whose rows split into 32-value blocks"
        )
        return GridCheck(status=NOT_APPLICABLE, on_grid=None, reason=reason)
    chooser = random.Random(seed)
    picked = sorted(chooser.sample(usable, min(tensors, len(usable))), key=usable.index)
    before = reader.bytes_read
    checked = on_grid = 0
    levels: list[int] = []
    for record in picked:
        width = record.shape[1]
        item = ITEM_BYTES[record.dtype]
        length = min(width, blocks_per_row * BLOCK)
        base = reader.data_offset(record.file) + record.data_start
        for row in sorted(chooser.sample(range(record.rows), min(rows, record.rows))):
            raw = reader.read(record.file, base + row * width * item, length * item)
            values = decode_values(raw, record.dtype)
            for start in range(0, len(values) - BLOCK + 1, BLOCK):
                on, count = block_on_grid(values[start : start + BLOCK])
                checked += 1
                on_grid += on
                levels.append(count)
    every = checked > 0 and on_grid == checked
    return GridCheck(
        status=ON_GRID if every else OFF_GRID,
        on_grid=every,
        reason=(
            f"every sampled block has at most {LEVELS} evenly spaced values"
            if every
            else f"{checked - on_grid} of {checked} sampled blocks have values off any 4-bit grid"
        ),
        blocks_checked=checked,
        blocks_on_grid=on_grid,
        levels_median=float(np.median(levels)) if levels else None,
        tensors_sampled=[record.name for record in picked],
        bytes_read=reader.bytes_read - before,
    )
