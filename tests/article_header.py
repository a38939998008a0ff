"""Headers shaped like the article's Gemma 4 E2B checkpoints, and its published header table.

The article publishes only its QAT file's header table (the reference `qat-safetensors-header.txt`:
per part, GB, share, tensor count, dtypes), not the 2,504 tensor names. These helpers write a
header with Gemma's Hugging Face names and a shape that reproduces that table: 35 layers of
width 1536, a 262,144-token vocabulary, per-layer inputs of 256 per layer; attention with
8 heads of 256 (512 in every fifth, global, layer) and 1 KV head; MLPs of 6,144 in layers 0-14
and 12,288 in layers 15-34, which share their KV cache (no k/v projections). Every linear of the
body, the per-layer gates included, is packed 4-bit with a BF16 scale per 32 weights. The audio
and vision towers are BF16 blocks of the published sizes. The same shape at BF16, with the input
embedding tied as the output projection, stands in for the bf16 release.

The body's shape is a reconstruction, not the published config: it is checked below to give the
published 1,090 tensors and 1.056 GB, and the bytes per token it implies are compared with the
figures the same author computed from the real headers (1.862 GB QAT, 4.597 GB bf16).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from tests.checkpoint_files import write_header_only

Entry = tuple[str, str, list[int]]

VOCAB = 262_144
HIDDEN = 1536
LAYERS = 35
PER_LAYER = 256
HEADS = 8
SHARED_FROM = 15  # layers from here on reuse an earlier layer's KV cache
AUDIO_BYTES = 614_000_000
VISION_BYTES = 337_000_000
LM = "model.language_model"

QAT_CONFIG = {
    "architectures": ["Gemma4ForConditionalGeneration"],
    "model_type": "gemma4",
    "quantization_config": {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {
                    "num_bits": 4,
                    "type": "int",
                    "symmetric": True,
                    "strategy": "group",
                    "group_size": 32,
                },
            }
        },
        "ignore": ["lm_head", "re:.*audio_tower.*", "re:.*vision_tower.*"],
    },
}
BF16_CONFIG = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4"}


@dataclass(frozen=True)
class TableRow:
    part: str
    gb: float
    share_percent: float
    tensors: int
    dtypes: list[str]


@dataclass(frozen=True)
class PublishedTable:
    tensors: int
    gb: float
    rows: list[TableRow]


def parse_published(text: str) -> PublishedTable:
    """The reference table: a '# ... N tensors, X GB' line, a column line, then one row a part."""
    first = text.splitlines()[0]
    totals = re.search(r"(\d+) tensors, ([\d.]+) GB", first)
    assert totals, first
    rows = []
    for line in text.splitlines():
        match = re.match(
            r"^([a-z][a-z -]+?)\s+([\d.]+)\s+([\d.]+)%\s+(\d+)\s+([A-Z0-9, ]+?)(\s{2,}.*)?$", line
        )
        if match:
            rows.append(
                TableRow(
                    part=match.group(1).strip(),
                    gb=float(match.group(2)),
                    share_percent=float(match.group(3)),
                    tensors=int(match.group(4)),
                    dtypes=[d.strip() for d in match.group(5).split(",")],
                )
            )
    return PublishedTable(int(totals.group(1)), float(totals.group(2)), rows)


def _linear(name: str, rows: int, cols: int, packed: bool) -> list[Entry]:
    if not packed:
        return [(f"{name}.weight", "BF16", [rows, cols])]
    return [
        (f"{name}.weight_packed", "I32", [rows, cols // 8]),
        (f"{name}.weight_scale", "BF16", [rows, cols // 32]),
        (f"{name}.weight_shape", "I64", [2]),
    ]


def body(packed: bool) -> list[Entry]:
    entries: list[Entry] = []
    for layer in range(LAYERS):
        prefix = f"{LM}.layers.{layer}"
        head_dim = 512 if layer % 5 == 4 else 256
        shared = layer >= SHARED_FROM
        mlp = 12_288 if shared else 6_144
        linears = [("self_attn.q_proj", HEADS * head_dim, HIDDEN)]
        if not shared:
            linears += [
                ("self_attn.k_proj", head_dim, HIDDEN),
                ("self_attn.v_proj", head_dim, HIDDEN),
            ]
        linears += [
            ("self_attn.o_proj", HIDDEN, HEADS * head_dim),
            ("mlp.gate_proj", mlp, HIDDEN),
            ("mlp.up_proj", mlp, HIDDEN),
            ("mlp.down_proj", HIDDEN, mlp),
            ("per_layer_input_gate", PER_LAYER, HIDDEN),
            ("per_layer_projection", HIDDEN, PER_LAYER),
        ]
        for name, rows, cols in linears:
            entries += _linear(f"{prefix}.{name}", rows, cols, packed)
        norms = [
            ("input_layernorm", HIDDEN),
            ("post_attention_layernorm", HIDDEN),
            ("pre_feedforward_layernorm", HIDDEN),
            ("post_feedforward_layernorm", HIDDEN),
            ("post_per_layer_input_norm", HIDDEN),
            ("self_attn.q_norm", head_dim),
        ]
        if not shared:
            norms.append(("self_attn.k_norm", head_dim))
        entries += [(f"{prefix}.{name}.weight", "BF16", [size]) for name, size in norms]
        entries.append((f"{prefix}.layer_scalar", "BF16", [1]))
    entries += _linear(f"{LM}.per_layer_model_projection", LAYERS * PER_LAYER, HIDDEN, packed)
    entries.append((f"{LM}.per_layer_projection_norm.weight", "BF16", [PER_LAYER]))
    entries.append((f"{LM}.norm.weight", "BF16", [HIDDEN]))
    return entries


def tower(prefix: str, count: int, target_bytes: int) -> list[Entry]:
    """`count` BF16 tensors of `target_bytes` in all, named like a tower's blocks."""
    kinds = (
        "attn.qkv.weight",
        "attn.proj.weight",
        "mlp.fc1.weight",
        "mlp.fc2.weight",
        "norm.weight",
    )
    each = (target_bytes // 2 // count) // 256 * 256
    entries: list[Entry] = [
        (f"{prefix}.blocks.{i // len(kinds)}.{kinds[i % len(kinds)]}", "BF16", [256, each // 256])
        for i in range(count - 1)
    ]
    entries.append((f"{prefix}.post_norm.weight", "BF16", [target_bytes // 2 - each * (count - 1)]))
    return entries


def qat_entries() -> list[Entry]:
    return [
        (f"{LM}.embed_tokens_per_layer.weight", "BF16", [VOCAB, LAYERS * PER_LAYER]),
        (f"{LM}.embed_tokens.weight", "BF16", [VOCAB, HIDDEN]),
        ("lm_head.weight", "BF16", [VOCAB, HIDDEN]),
        *body(packed=True),
        *tower("model.audio_tower", 752, AUDIO_BYTES),
        *tower("model.vision_tower", 659, VISION_BYTES),
    ]


def bf16_entries() -> list[Entry]:
    return [
        (f"{LM}.embed_tokens_per_layer.weight", "BF16", [VOCAB, LAYERS * PER_LAYER]),
        (f"{LM}.embed_tokens.weight", "BF16", [VOCAB, HIDDEN]),
        *body(packed=False),
        *tower("model.audio_tower", 752, AUDIO_BYTES),
        *tower("model.vision_tower", 659, VISION_BYTES),
    ]


def write_checkpoint(folder: Path, entries: list[Entry], config: dict[str, object]) -> Path:
    """model.safetensors (header real, data a sparse hole) and config.json in `folder`."""
    write_header_only(folder / "model.safetensors", entries)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder
