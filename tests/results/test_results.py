from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path

from sagemeter.atomic import write_text_atomic
from sagemeter.results import MeasureResult, load_result, save_result
from tests.conftest import reference_file


def test_reference_file_loads_and_names_itself_from_the_file() -> None:
    result = load_result(reference_file("measure-gemma-4-e2b-qat.json"))
    assert result.name == "gemma-4-e2b-qat"
    assert result.decode_tokens_per_second == 105.1
    assert result.load_tokens_per_second == {"1": 85.35, "4": 328.7, "16": 1077.25}
    assert result.quality_counts() == (37, 40)
    assert result.detail is None


def test_save_then_load_round_trips(tmp_path: Path) -> None:
    result = MeasureResult(name="x", decode_tokens_per_second=12.5, quality="3/4")
    path = tmp_path / "measure-x.json"
    save_result(result, path)
    assert load_result(path) == result
    assert json.loads(path.read_text())["decode_tokens_per_second"] == 12.5


def test_atomic_write_leaves_no_part_file_and_normal_permissions(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    write_text_atomic(path, "one")
    write_text_atomic(path, "two")
    assert path.read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def test_interrupted_write_keeps_the_old_file(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "out.json"
    write_text_atomic(path, "old")

    def broken_replace(src: str, dst: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", broken_replace)
    with contextlib.suppress(KeyboardInterrupt):
        write_text_atomic(path, "new")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]
