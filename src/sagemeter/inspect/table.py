"""A checkpoint's tensor table as read from its header, whatever the container format.

Every source (a local safetensors file or folder, a GGUF file, a Hub repository) becomes one
`TensorTable`: the tensors with their byte ranges, the checkpoint's config.json when it has one,
and a reader for byte ranges of its files (for the grid check), so nothing downstream knows
where the bytes live.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class TensorRecord:
    """One tensor: its name, storage dtype, row-major shape and where its bytes are."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    file: str
    data_start: int = 0  # offset of its first byte, from the reader's data_offset(file)

    @property
    def rows(self) -> int:
        """The first dimension (a vocabulary's size for an embedding), at least 1."""
        return max(1, self.shape[0]) if self.shape else 1


class RangeReader(Protocol):
    """Reads a byte range of one of the checkpoint's files and counts what it read."""

    bytes_read: int

    def data_offset(self, file: str) -> int:
        """What a TensorRecord's data_start counts from, in `file`."""
        ...

    def read(self, file: str, start: int, length: int) -> bytes: ...


class LocalFiles:
    """Byte ranges of files in one folder, read with seek."""

    def __init__(self, paths: dict[str, Path]) -> None:
        self.paths = paths
        self.bytes_read = 0

    def data_offset(self, file: str) -> int:
        return 0  # local records hold absolute offsets

    def read(self, file: str, start: int, length: int) -> bytes:
        with open(self.paths[file], "rb") as handle:
            handle.seek(start)
            data = handle.read(length)
        self.bytes_read += len(data)
        return data


@dataclass
class TensorTable:
    """What a source's header says: its tensors, config and how to read more of its bytes."""

    source: str
    format: str
    location: str
    files: list[str]
    tensors: list[TensorRecord]
    reader: RangeReader
    config: dict[str, Any] | None = None
    revision: str | None = None
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. what was read in the source's place
