"""`open_gguf`: one parse per file version, and one clear line for a file that is no GGUF."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader, GGUFWriter

from sagemeter.errors import UserError
from sagemeter.gguf_open import open_gguf, read_gguf

TENSORS = 3


def _small_gguf(path: Path) -> Path:
    """A GGUF of three small tensors: the cache is about files and versions, not their size (the
    shipped checkpoint takes seconds to parse, the most of it its 49,152-word vocabulary)."""
    writer = GGUFWriter(path, "llama")
    for index in range(TENSORS):
        writer.add_tensor(f"blk.{index}.weight", np.full((4, 8), index, dtype=np.float32))
    writer.add_token_list(["<s>", "hello", "wörld", ""])  # an array of strings, as a vocabulary
    writer.add_token_scores([0.0, -1.5, -2.25, 3.0])
    writer.add_context_length(2048)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_a_file_is_parsed_once_per_version(tmp_path: Path) -> None:
    path = _small_gguf(tmp_path / "model.gguf")
    first = open_gguf(path, "checkpoint file")
    assert open_gguf(str(path)) is first  # the same file, however it is named: no new parse
    assert len(first.tensors) == TENSORS
    # Written again (a new mtime): parsed again, never the old version's reader.
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    again = open_gguf(path)
    assert again is not first and len(again.tensors) == TENSORS


def test_the_plain_array_parse_reads_what_the_package_reads(tmp_path: Path) -> None:
    path = _small_gguf(tmp_path / "model.gguf")
    ours, theirs = read_gguf(path), GGUFReader(str(path))
    assert list(ours.fields) == list(theirs.fields)
    for name, field in theirs.fields.items():
        mine = ours.fields[name]
        assert (mine.types, mine.data, mine.offset) == (field.types, field.data, field.offset), name
        assert all(np.array_equal(a, b) for a, b in zip(mine.parts, field.parts, strict=True))
    assert ours.fields["tokenizer.ggml.tokens"].contents() == ["<s>", "hello", "wörld", ""]
    assert [(t.name, list(t.shape), t.n_bytes, t.data_offset) for t in ours.tensors] == [
        (t.name, list(t.shape), t.n_bytes, t.data_offset) for t in theirs.tensors
    ]
    assert all(
        np.array_equal(a.data, b.data) for a, b in zip(ours.tensors, theirs.tensors, strict=True)
    )
    assert type(ours.tensors[0].data) is np.ndarray  # no memmap subclass left to slow a slice


def test_a_file_that_is_no_gguf_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 60)
    with pytest.raises(UserError, match=r"^checkpoint file .*bad\.gguf: not a readable GGUF file"):
        open_gguf(bad, "checkpoint file")
    with pytest.raises(UserError, match="not a readable GGUF file"):
        open_gguf(tmp_path / "missing.gguf")
