"""`inspect hf:ORG/NAME` against a loopback Hub (HF_ENDPOINT) that counts every byte it sends:
only headers (and config.json) cross the wire, a gated model needs HF_TOKEN, which never shows.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import save_file

from sagemeter.errors import UserError
from sagemeter.inspect.build import inspect_sources
from tests.article_header import QAT_CONFIG, qat_entries, write_checkpoint
from tests.hub_fake import Hub, Repo, serve_hub

# Slow: the Hub's files are the session's derived F32 and compressed-tensors checkpoints (about
# 20 s to make once a run), which the slow tier makes for its own tests anyway.
pytestmark = pytest.mark.slow

TOKEN = "hf_secret_token_for_the_gated_test"
FIRST_READ = (
    100_001  # huggingface_hub asks for the first 100,000 bytes and then the rest of a header
)


def header_length(path: Path) -> int:
    with open(path, "rb") as handle:
        return int.from_bytes(handle.read(8), "little")


def safetensors_header(path: Path) -> dict[str, Any]:
    with open(path, "rb") as handle:
        header: dict[str, Any] = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
    return header


def write_header_only_shard(path: Path, tensors: dict[str, Any]) -> None:
    """A safetensors file with these tensors' real header, its data a hole of the right size.

    Only headers cross the wire (the sharded test checks the bytes the Hub sent), so the shards
    need not copy the 540 MB of F32 data: a sparse file of the full size costs no writing."""
    entries, offset = {}, 0
    for name, entry in tensors.items():
        begin, end = entry["data_offsets"]
        entries[name] = {**entry, "data_offsets": [offset, offset + end - begin]}
        offset += end - begin
    text = json.dumps(entries, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    with open(path, "wb") as out:
        out.write(len(text).to_bytes(8, "little") + text)
        out.truncate(8 + len(text) + offset)


@pytest.fixture(scope="module")
def files(
    q4_path: Path, f32_folder: Path, ct_folder: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    q4, f32, ct = q4_path, f32_folder, ct_folder  # the session's, shared with test_inspect.py
    root = tmp_path_factory.mktemp("hub-files")
    qat = write_checkpoint(root / "qat", qat_entries(), QAT_CONFIG)
    sharded = root / "sharded"
    sharded.mkdir()
    header = safetensors_header(f32 / "model.safetensors")
    names = sorted(name for name in header if name != "__metadata__")
    halves = {
        "model-00001-of-00002.safetensors": names[:100],
        "model-00002-of-00002.safetensors": names[100:],
    }
    for file, members in halves.items():
        write_header_only_shard(sharded / file, {name: header[name] for name in members})
    weight_map = {name: file for file, members in halves.items() for name in members}
    (sharded / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    small = root / "small"
    small.mkdir()
    weights = np.random.default_rng(3).standard_normal((64, 256)).astype(np.float32)
    save_file({"model.layers.0.mlp.up_proj.weight": weights}, str(small / "model.safetensors"))
    return {"f32": f32, "ct": ct, "qat": qat, "sharded": sharded, "gguf": q4, "small": small}


def repo(folder: Path, **options: object) -> Repo:
    return Repo({path.name: path for path in folder.iterdir() if path.is_file()}, **options)  # type: ignore[arg-type]


@pytest.fixture
def hub(files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    repos = {
        "test/smollm2-f32": repo(files["f32"]),
        "test/smollm2-w4": repo(files["ct"], token=TOKEN),
        "google/gemma-4-E2B-it-qat-w4a16-ct": repo(files["qat"]),
        "test/sharded": repo(files["sharded"]),
        "test/gguf-only": Repo({files["gguf"].name: files["gguf"]}),
        "test/no-ranges": repo(files["small"], honour_range=False),
    }
    with serve_hub(repos) as served:
        monkeypatch.setenv("HF_ENDPOINT", served.url)
        monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.setenv("HF_HOME", str(files["f32"].parent / "hf-home"))
        yield served


def test_only_the_header_is_fetched_and_the_facts_match_the_local_file(
    hub: Hub, files: dict[str, Path]
) -> None:
    remote = inspect_sources(["hf:test/smollm2-f32"]).checkpoints[0]
    local = inspect_sources([str(files["f32"])]).checkpoints[0]
    weights = files["f32"] / "model.safetensors"
    assert header_length(weights) < FIRST_READ  # one range request holds all of this header
    assert hub.bytes_sent("test/smollm2-f32", "model.safetensors") == FIRST_READ
    assert (
        hub.bytes_sent("test/smollm2-f32", "config.json")
        == (files["f32"] / "config.json").stat().st_size
    )
    assert FIRST_READ / weights.stat().st_size < 0.001
    assert remote.groups == local.groups and remote.decode == local.decode
    assert remote.revision == Repo({}).sha and remote.location.endswith("/test/smollm2-f32")
    ranges = [
        r
        for method, path, r in hub.requests
        if path.endswith("model.safetensors") and method == "GET"
    ]
    assert ranges == ["bytes=0-100000"]


def test_the_article_sized_checkpoint_costs_its_header_not_its_8_gb(
    hub: Hub, files: dict[str, Path]
) -> None:
    facts = inspect_sources(["hf:google/gemma-4-E2B-it-qat-w4a16-ct@main"]).checkpoints[0]
    weights = files["qat"] / "model.safetensors"
    length = header_length(weights)
    assert length > FIRST_READ  # 2,504 tensors: the header needs a second range request
    sent = hub.bytes_sent("google/gemma-4-E2B-it-qat-w4a16-ct", "model.safetensors")
    assert sent == FIRST_READ + length
    assert weights.stat().st_size > 8e9 and sent / weights.stat().st_size < 1e-4
    assert facts.tensors == 2504 and round(facts.total_bytes / 1e9, 3) == 8.316
    body = facts.group("transformer body")
    assert (
        body is not None
        and body.storage == "packed 4-bit, compressed-tensors, group 32, BF16 scales"
    )


def test_grid_check_reads_sampled_blocks_by_range(hub: Hub) -> None:
    facts = inspect_sources(["hf:test/smollm2-f32"], check_grid=True).checkpoints[0]
    check = facts.grid_check
    assert check is not None and check.on_grid is True and check.blocks_checked == 128
    # The header, then 8 bytes for the header's size, then the sampled blocks: nothing else.
    assert check.bytes_read == 8 + 128 * 32 * 4
    assert hub.bytes_sent("test/smollm2-f32", "model.safetensors") == FIRST_READ + check.bytes_read


def test_a_server_that_ignores_ranges_stops_the_grid_check(
    hub: Hub, files: dict[str, Path]
) -> None:
    size = (files["small"] / "model.safetensors").stat().st_size
    facts = inspect_sources(["hf:test/no-ranges"]).checkpoints[0]  # small: the header read is all
    assert facts.tensors == 1 and hub.bytes_sent("test/no-ranges", "model.safetensors") == size
    with pytest.raises(UserError, match="ignored a range request"):
        inspect_sources(["hf:test/no-ranges"], check_grid=True)


def test_a_sharded_model_reads_its_index_and_every_shard_header(
    hub: Hub, files: dict[str, Path]
) -> None:
    remote = inspect_sources(["hf:test/sharded"]).checkpoints[0]
    local = inspect_sources([str(files["f32"])]).checkpoints[0]
    assert remote.files == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert [(g.name, g.bytes, g.tensors) for g in remote.groups] == [
        (g.name, g.bytes, g.tensors) for g in local.groups
    ]
    for shard in remote.files:
        assert hub.bytes_sent("test/sharded", shard) <= FIRST_READ


def test_hub_errors_are_one_sentence(hub: Hub) -> None:
    cases = [
        ("hf:test/missing", "no such model"),
        ("hf:test/smollm2-f32@v9", "no revision 'v9'"),
        ("hf:test/gguf-only", "holds GGUF files (SmolLM2-135M-Instruct.Q4_1.gguf)"),
        ("hf:test/smollm2-w4", "gated"),
    ]
    for source, needle in cases:
        with pytest.raises(UserError, match=re.escape(needle)):
            inspect_sources([source])


def test_cli_reads_a_gated_model_with_hf_token_and_never_prints_it(
    hub: Hub, sagemeter_env: dict[str, str], files: dict[str, Path]
) -> None:
    env = {**sagemeter_env, "HF_ENDPOINT": hub.url, "HF_HOME": str(files["f32"].parent / "cli-hf")}
    env.pop("HF_TOKEN", None)

    def run(extra: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sagemeter", "inspect", "hf:test/smollm2-w4", *args],
            capture_output=True,
            text=True,
            env={**env, **extra, "COLUMNS": "200"},
            timeout=300,
            check=False,
        )

    refused = run({})
    assert refused.returncode == 2 and "gated" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    shown = run({"HF_TOKEN": TOKEN}, "--gpu", "L4")
    assert shown.returncode == 0, shown.stderr
    assert "packed 4-bit, compressed-tensors, group 32, BF16 scales" in shown.stdout
    as_json = run({"HF_TOKEN": TOKEN}, "--json")
    assert json.loads(as_json.stdout)["revision"] == Repo({}).sha
    for done in (refused, shown, as_json):
        assert TOKEN not in done.stdout + done.stderr
    assert f"Bearer {TOKEN}" in hub.authorizations
