"""Rewrite a GGUF file with every tensor dequantized to F32, metadata unchanged but the file type.

Why F32 and not F16/BF16: F32 holds each dequantized Q4_1 value exactly (F16 would round some),
and llama.cpp's CPU path for F32 is representative, while BF16 was several times slower than F16
in the prebuilt xllamacpp wheel on a 2-core x86 machine (see README).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from sagemeter.gguf_open import read_gguf

LLAMA_FTYPE_ALL_F32 = 0

# Called as (tensors done, tensors in all) while the file is derived.
WidenProgress = Callable[[int, int], None]


def _quiet(done: int, total: int) -> None:
    """Default progress callback."""


def widen_to_f32(source: Path, destination: Path, progress: WidenProgress = _quiet) -> None:
    from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter
    from gguf.quants import dequantize

    reader = read_gguf(source)
    architecture_field = reader.get_field("general.architecture")
    if architecture_field is None:
        raise ValueError(f"{source} has no general.architecture; not a llama.cpp model file")
    architecture = architecture_field.contents()
    writer = GGUFWriter(str(destination), architecture)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        if field.name == "general.file_type":
            writer.add_uint32(field.name, LLAMA_FTYPE_ALL_F32)
            continue
        value_type = field.types[0]
        if value_type == GGUFValueType.ARRAY:
            sub_type = field.types[-1] if len(field.types) > 1 else None
            writer.add_key_value(field.name, field.contents(), value_type, sub_type=sub_type)
        else:
            writer.add_key_value(field.name, field.contents(), value_type)
    total = len(reader.tensors)
    for done, tensor in enumerate(reader.tensors, start=1):
        values = dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        writer.add_tensor(tensor.name, values, raw_dtype=GGMLQuantizationType.F32)
        progress(done, total)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
