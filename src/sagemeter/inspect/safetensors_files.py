"""Local safetensors checkpoints: one file, or a folder (sharded with model.safetensors.index.json).

A safetensors file starts with an 8-byte little-endian length and that many bytes of JSON naming
each tensor's dtype, shape and byte range; only those bytes are read here, never the weights.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sagemeter.errors import UserError
from sagemeter.inspect.table import LocalFiles, TensorRecord, TensorTable
from sagemeter.textfiles import CONFIG_CAP, read_json

INDEX_FILE = "model.safetensors.index.json"
CONFIG_FILE = "config.json"
# The format caps its JSON header at 100 MB; anything larger is not a safetensors file.
HEADER_LIMIT = 100_000_000


def header_records(
    header: dict[str, Any], file: str, data_base: int, file_size: int | None, where: str
) -> list[TensorRecord]:
    """The tensors of one parsed header; `data_base` is where the data section starts."""
    records = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = str(entry["dtype"])
            shape = tuple(int(size) for size in entry["shape"])
            start, end = (int(offset) for offset in entry["data_offsets"])
            if min((*shape, start), default=0) < 0:
                raise ValueError("a size or offset below zero")
        except (KeyError, TypeError, ValueError):
            raise UserError(f"{where}: tensor {name!r} has a malformed header entry") from None
        if end < start or (file_size is not None and data_base + end > file_size):
            raise UserError(
                f"{where}: tensor {name!r} lies beyond the end of the file (an incomplete copy?)"
            )
        records.append(TensorRecord(name, dtype, shape, end - start, file, data_base + start))
    return records


def read_file_header(path: Path) -> list[TensorRecord]:
    """The tensors of one local .safetensors file, from its header alone."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        prefix = handle.read(8)
        length = int.from_bytes(prefix, "little") if len(prefix) == 8 else -1
        if length <= 0 or length > HEADER_LIMIT or 8 + length > size:
            raise UserError(
                f"{path}: not a safetensors file (its first 8 bytes are no header size)"
            )
        raw = handle.read(length)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise UserError(f"{path}: not a safetensors file (its header is not JSON)") from None
    if not isinstance(header, dict):
        raise UserError(f"{path}: not a safetensors file (its header is not a JSON object)")
    return header_records(header, path.name, 8 + length, size, str(path))


def read_config(folder: Path, warnings: list[str]) -> dict[str, Any] | None:
    """The folder's config.json, or None; a broken one is a warning, not a failure."""
    path = folder / CONFIG_FILE
    if not path.is_file():
        return None
    try:
        config = read_json(path, CONFIG_CAP)
    except UserError as exc:
        warnings.append(f"{exc}; storage is read from tensor names")
        return None
    return config if isinstance(config, dict) else None


def shard_names(folder: Path) -> list[str]:
    """The files a folder's checkpoint is made of: the index's shards, else every .safetensors."""
    index = folder / INDEX_FILE
    if index.is_file():
        listing = read_json(index, CONFIG_CAP)
        try:
            weight_map = listing["weight_map"]
            names = sorted({str(file) for file in weight_map.values()})
        except (KeyError, TypeError, AttributeError):
            raise UserError(f"{index}: not a safetensors index (no weight_map)") from None
        missing = [name for name in names if not (folder / name).is_file()]
        if missing:
            raise UserError(f"{index} names {missing[0]}, which is not in {folder}")
        return names
    return sorted(path.name for path in folder.glob("*.safetensors"))


def read_safetensors(source: str, paths: list[Path], folder: Path) -> TensorTable:
    """A local checkpoint of one or more safetensors files (all headers, nothing else)."""
    warnings: list[str] = []
    tensors: list[TensorRecord] = []
    for path in paths:
        tensors.extend(read_file_header(path))
    location = str(folder if len(paths) > 1 else paths[0])
    return TensorTable(
        source=source,
        format="safetensors",
        location=location,
        files=[path.name for path in paths],
        tensors=tensors,
        reader=LocalFiles({path.name: path for path in paths}),
        config=read_config(folder, warnings),
        warnings=warnings,
    )
