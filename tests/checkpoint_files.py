"""Checkpoint files the inspect tests read, made here from the shipped SmolLM2 GGUF.

- `write_hf_safetensors`: the GGUF's tensors as an F32 safetensors checkpoint with Hugging Face
  names and a config.json (the GGUF's Q/K rows un-permuted back to Hugging Face's order).
- `write_compressed_tensors`: the same weights as a packed 4-bit compressed-tensors export
  (group 32, BF16 scales, the embedding BF16), the layout llm-compressor writes for vLLM.
- `write_header_only`: a safetensors file whose header is real and whose data is a sparse hole,
  for checkpoints too big to write (the article's 8.3 GB QAT file).

A fuller GGUF → Hugging Face export (with the tokenizer, loadable by vLLM) may replace the first
helper; inspect needs only the tensors and config.json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize
from safetensors import TensorSpec, serialize_file
from safetensors.numpy import save_file

from sagemeter.gguf_open import read_gguf

LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
TOP_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
GROUP = 32


def hf_name(gguf_name: str) -> str:
    if gguf_name in TOP_NAMES:
        return TOP_NAMES[gguf_name]
    _, layer, part, suffix = gguf_name.split(".")
    return f"model.layers.{layer}.{LAYER_NAMES[part]}.{suffix}"


def _field(reader: GGUFReader, key: str) -> Any:
    field = reader.get_field(key)
    assert field is not None, key
    return field.contents()


def _unpermute(weights: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's rotary permutation of Q/K rows (its converter interleaves the halves)."""
    rows = weights.shape[0]
    return (
        weights.reshape(heads, rows // heads // 2, 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def hf_tensors(gguf_path: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Every tensor of the GGUF dequantized to F32 under its Hugging Face name, and config.json."""
    reader = read_gguf(gguf_path)  # the fast parse: test data, not the check
    heads = int(_field(reader, "llama.attention.head_count"))
    kv_heads = int(_field(reader, "llama.attention.head_count_kv"))
    tensors: dict[str, np.ndarray] = {}
    for tensor in reader.tensors:
        values = dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        values = values.reshape([int(size) for size in reversed(tensor.shape)])
        if tensor.name.endswith("attn_q.weight"):
            values = _unpermute(values, heads)
        elif tensor.name.endswith("attn_k.weight"):
            values = _unpermute(values, kv_heads)
        tensors[hf_name(tensor.name)] = np.ascontiguousarray(values)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": int(_field(reader, "llama.embedding_length")),
        "intermediate_size": int(_field(reader, "llama.feed_forward_length")),
        "num_hidden_layers": int(_field(reader, "llama.block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "max_position_embeddings": int(_field(reader, "llama.context_length")),
        "rms_norm_eps": float(_field(reader, "llama.attention.layer_norm_rms_epsilon")),
        "rope_theta": float(_field(reader, "llama.rope.freq_base")),
        "vocab_size": int(tensors["model.embed_tokens.weight"].shape[0]),
        "bos_token_id": int(_field(reader, "tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(_field(reader, "tokenizer.ggml.eos_token_id")),
        "tie_word_embeddings": "lm_head.weight" not in tensors,
        "torch_dtype": "float32",
    }
    return tensors, config


def write_hf_safetensors(gguf_path: Path, folder: Path) -> Path:
    """model.safetensors (F32, Hugging Face names) and config.json in `folder`."""
    tensors, config = hf_tensors(gguf_path)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


def to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 → bfloat16 bit patterns (round to nearest even), as uint16."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)
    return (rounded >> 16).astype(np.uint16)


def pack_int4(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric 4-bit, one scale per 32 inputs: (int32 words of 8 values, F32 scales)."""
    rows, width = weights.shape
    blocks = weights.reshape(rows, width // GROUP, GROUP)
    scales = np.abs(blocks).max(axis=2) / 7.0
    scales[scales == 0] = 1.0
    levels = np.clip(np.round(blocks / scales[:, :, None]), -8, 7).astype(np.int64) + 8
    nibbles = levels.reshape(rows, width // 8, 8)
    words = np.zeros((rows, width // 8), dtype=np.int64)
    for position in range(8):
        words |= nibbles[:, :, position] << (4 * position)
    return words.astype(np.uint32).view(np.int32), scales.astype(np.float32)


def write_compressed_tensors(gguf_path: Path, folder: Path) -> Path:
    """The weights as compressed-tensors `pack-quantized` (4-bit, group 32, BF16 scales)."""
    tensors, config = hf_tensors(gguf_path)
    arrays: dict[str, tuple[str, np.ndarray]] = {}
    for name, values in tensors.items():
        if values.ndim == 2 and "layers." in name:
            module = name.removesuffix(".weight")
            packed, scales = pack_int4(values)
            arrays[f"{module}.weight_packed"] = ("int32", packed)
            arrays[f"{module}.weight_scale"] = ("bfloat16", to_bf16_bits(scales))
            arrays[f"{module}.weight_shape"] = ("int64", np.array(values.shape, dtype=np.int64))
        else:
            arrays[name] = ("bfloat16", to_bf16_bits(values))
    specs = {
        name: TensorSpec(
            dtype=dtype, shape=list(array.shape), data_ptr=array.ctypes.data, data_len=array.nbytes
        )
        for name, (dtype, array) in arrays.items()
    }
    folder.mkdir(parents=True, exist_ok=True)
    serialize_file(specs, folder / "model.safetensors", metadata={"format": "pt"})
    config["torch_dtype"] = "bfloat16"
    config["quantization_config"] = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "quantization_status": "compressed",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {
                    "num_bits": 4,
                    "type": "int",
                    "symmetric": True,
                    "strategy": "group",
                    "group_size": GROUP,
                },
                "input_activations": None,
            }
        },
        "ignore": ["lm_head"],
    }
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "I64": 8, "U8": 1, "I8": 1, "F8_E4M3": 1}


def write_header_only(path: Path, entries: list[tuple[str, str, list[int]]]) -> int:
    """A safetensors file of (name, dtype, shape) whose data is a hole; returns its size."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dtype, shape in entries:
        size = DTYPE_BYTES[dtype] * int(np.prod(shape, dtype=np.int64))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the format pads the header to 8 bytes
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(len(raw).to_bytes(8, "little"))
        handle.write(raw)
        handle.truncate(8 + len(raw) + offset)
    return 8 + len(raw) + offset
