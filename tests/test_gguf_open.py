"""`open_gguf`: one parse per file version, and one clear line for a file that is no GGUF."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from sagemeter.errors import UserError
from sagemeter.gguf_open import open_gguf


def test_a_file_is_parsed_once_per_version(q4_path: Path, tmp_path: Path) -> None:
    copy = tmp_path / "model.gguf"
    shutil.copyfile(q4_path, copy)
    first = open_gguf(copy, "checkpoint file")
    assert open_gguf(str(copy)) is first  # the same file, however it is named: no new parse
    assert len(first.tensors) == 272
    # Written again (a new mtime): parsed again, never the old version's reader.
    stat = copy.stat()
    os.utime(copy, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert open_gguf(copy) is not first


def test_a_file_that_is_no_gguf_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 60)
    with pytest.raises(UserError, match=r"^checkpoint file .*bad\.gguf: not a readable GGUF file"):
        open_gguf(bad, "checkpoint file")
    with pytest.raises(UserError, match="not a readable GGUF file"):
        open_gguf(tmp_path / "missing.gguf")
