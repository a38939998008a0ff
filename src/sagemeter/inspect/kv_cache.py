"""The KV cache a served checkpoint needs per token, from its config.json.

Each layer that keeps its own cache stores a key and a value of `kv heads × head dim` numbers per
token, at the model's dtype (vLLM's `--kv-cache-dtype auto`). Multimodal configs keep these in
`text_config`. Layers that reuse an earlier layer's cache (Gemma's `num_kv_shared_layers`) store
nothing; full-attention layers may have a wider head (`global_head_dim`). Sliding-window layers
are counted at full length, so the figure is an upper bound for models that have them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1}
DEFAULT_DTYPE_BYTES = 2  # vLLM serves a model of no stated dtype at 16 bits


class KvCache(BaseModel):
    """Bytes of KV cache one token of context holds, and the config figures it comes from."""

    bytes_per_token: int
    layers: int = Field(description="layers that keep their own cache")
    kv_heads: int
    head_dim: int
    dtype_bytes: int
    notes: list[str] = Field(default_factory=list)


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    inner = config.get("text_config")
    return {**config, **inner} if isinstance(inner, dict) else config


def _int(config: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def kv_cache_of(config: dict[str, Any] | None) -> tuple[KvCache | None, str | None]:
    """(the KV cache per token, None) or (None, why it cannot be known from this config)."""
    if not config:
        return None, "no config.json: the layers and heads that size the KV cache are unknown"
    text = _text_config(config)
    layers = _int(text, "num_hidden_layers", "n_layer", "num_layers")
    heads = _int(text, "num_attention_heads", "n_head")
    if layers is None or heads is None:
        return None, "config.json names no num_hidden_layers / num_attention_heads"
    notes: list[str] = []
    kv_heads = _int(text, "num_key_value_heads", "num_kv_heads") or heads
    head_dim = _int(text, "head_dim")
    if head_dim is None:
        hidden = _int(text, "hidden_size", "n_embd")
        if hidden is None:
            return None, "config.json names neither head_dim nor hidden_size"
        head_dim = hidden // heads
    shared = _int(text, "num_kv_shared_layers") or 0
    own = max(layers - shared, 0)
    if shared:
        notes.append(f"{shared} of {layers} layers reuse an earlier layer's cache")
    dims = [head_dim] * own
    layer_types = text.get("layer_types")
    global_dim = _int(text, "global_head_dim")
    if isinstance(layer_types, list) and global_dim:
        dims = [
            global_dim if kind == "full_attention" else head_dim for kind in layer_types[:own]
        ] + [head_dim] * max(own - len(layer_types), 0)
    if isinstance(layer_types, list) and "sliding_attention" in layer_types:
        notes.append("sliding-window layers are counted at full length: an upper bound")
    dtype = str(text.get("torch_dtype") or text.get("dtype") or config.get("torch_dtype") or "")
    dtype_bytes = DTYPE_BYTES.get(dtype.removeprefix("torch."))
    if dtype_bytes is None:
        dtype_bytes = DEFAULT_DTYPE_BYTES
        notes.append(f"no known dtype in config.json ({dtype or 'none'}): 16-bit assumed")
    per_token = sum(2 * kv_heads * dim * dtype_bytes for dim in dims)
    return (
        KvCache(
            bytes_per_token=per_token,
            layers=own,
            kv_heads=kv_heads,
            head_dim=head_dim,
            dtype_bytes=dtype_bytes,
            notes=notes,
        ),
        None,
    )
