"""GGUF files (llama.cpp): the tensor table and the file type, read with the `gguf` package."""

from __future__ import annotations

from pathlib import Path

from sagemeter.gguf_open import open_gguf
from sagemeter.inspect.table import LocalFiles, TensorRecord, TensorTable


def read_gguf(source: str, path: Path) -> TensorTable:
    """Every tensor of a GGUF file with its quant type; shapes put the row count first."""
    reader = open_gguf(path)
    from gguf import LlamaFileType

    tensors = [
        TensorRecord(
            name=tensor.name,
            dtype=tensor.tensor_type.name,
            # ggml lists the innermost dimension first; row-major order puts the rows first.
            shape=tuple(int(size) for size in reversed(tensor.shape)),
            nbytes=int(tensor.n_bytes),
            file=path.name,
            data_start=int(tensor.data_offset),
        )
        for tensor in reader.tensors
    ]
    config = None
    field = reader.get_field("general.file_type")
    if field is not None:
        try:
            file_type = LlamaFileType(int(field.contents())).name
        except ValueError:
            file_type = str(field.contents())
        config = {"gguf_file_type": file_type.removeprefix("MOSTLY_").removeprefix("ALL_")}
    return TensorTable(
        source=source,
        format="gguf",
        location=str(path),
        files=[path.name],
        tensors=tensors,
        reader=LocalFiles({path.name: path}),
        config=config,
    )
