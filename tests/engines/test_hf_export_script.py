"""The export script's shared parses, run in sagemeter's own environment (it has `gguf`, not
torch): every read of a GGUF file gets the one plain-array reader, and gguf's tensor-name map is
built once per architecture and block count (transformers asks for it once per module)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import gguf
import pytest

from sagemeter.engines import hf_export
from sagemeter.engines.checkpoints import resolve_checkpoint
from sagemeter.gguf_plain import plain_reader_class


def export_script() -> ModuleType:
    """The script as the vLLM environment runs it: by its path, not as part of sagemeter."""
    spec = importlib.util.spec_from_file_location("hf_export_script_under_test", hf_export.SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def patched_gguf(monkeypatch: pytest.MonkeyPatch) -> type[gguf.GGUFReader]:
    """gguf with the script's patches, put back after the test; sagemeter's plain reader class,
    made before them (it subclasses gguf's reader)."""
    plain = plain_reader_class()
    monkeypatch.setattr(gguf, "GGUFReader", gguf.GGUFReader)
    monkeypatch.setattr(gguf, "get_tensor_name_map", gguf.get_tensor_name_map)
    script = export_script()
    script.use_plain_reader()
    script.parse_once()
    return plain


def test_every_read_of_a_file_shares_one_plain_parse(
    patched_gguf: type[gguf.GGUFReader], tmp_path: Path
) -> None:
    path = resolve_checkpoint("smollm2-q4_1").path
    first = gguf.GGUFReader(str(path))
    assert gguf.GGUFReader(path) is first  # a str and a Path of the same file alike
    link = tmp_path / "same.gguf"
    link.symlink_to(path)
    assert gguf.GGUFReader(str(link)) is first  # the file, not its spelling
    assert type(first).__name__ == "PlainArrayReader"
    alone = patched_gguf(str(path))  # a parse of its own: the shared one is whole
    assert list(first.fields) == list(alone.fields)
    assert [t.name for t in first.tensors] == [t.name for t in alone.tensors]


def test_the_tensor_name_map_is_built_once_per_architecture_and_block_count(
    patched_gguf: type[gguf.GGUFReader],
) -> None:
    llama = gguf.MODEL_ARCH.LLAMA
    built = gguf.get_tensor_name_map(llama, 30)
    assert gguf.get_tensor_name_map(llama, 30) is built
    assert gguf.get_tensor_name_map(llama, 2) is not built
    assert built.mapping == gguf.TensorNameMap(llama, 30).mapping
