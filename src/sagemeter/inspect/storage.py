"""How a group of tensors is stored, in words, from config.json and the tensors' own names.

config.json's `quantization_config` says the method (compressed-tensors, GPTQ, AWQ, FP8,
bitsandbytes) and its bits and group size; the names say which tensors it applies to
(`weight_packed` and `weight_scale` for compressed-tensors, `qweight`/`qzeros`/`scales` for
GPTQ and AWQ, `absmax` for bitsandbytes), and the dtypes say the rest (FP8, BF16, GGUF types).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from sagemeter.inspect.table import TensorRecord

PACKED_SUFFIXES = ("weight_packed", "qweight")
# Tensors that only serve a quantized weight: scales, zero points, shapes, group indices.
AUXILIARY_SUFFIXES = (
    "weight_scale",
    "weight_zero_point",
    "weight_shape",
    "weight_g_idx",
    "weight_global_scale",
    "input_scale",
    "input_zero_point",
    "output_scale",
    "qzeros",
    "scales",
    "g_idx",
    "absmax",
    "quant_map",
    "nested_absmax",
    "nested_quant_map",
    "scale_inv",
    "weight_scale_inv",
)
PACKED_SHARE_FLOOR = 0.01  # a rest smaller than this is not worth a clause


@dataclass(frozen=True)
class QuantScheme:
    """What config.json declares: method, bits, group size (None where it does not say)."""

    method: str
    format: str | None = None
    bits: int | None = None
    group_size: int | None = None
    strategy: str | None = None
    block: list[int] | None = None

    def words(self) -> str:
        parts = [self.method]
        if self.format:
            parts.append(self.format)
        if self.bits:
            parts.append(f"{self.bits}-bit weights")
        if self.group_size and self.group_size > 0:
            parts.append(f"group {self.group_size}")
        elif self.strategy:
            parts.append(f"per {self.strategy}")
        if self.block:
            parts.append("block " + "×".join(str(size) for size in self.block))
        return ", ".join(parts)


def quant_scheme(config: dict[str, Any] | None) -> QuantScheme | None:
    """The quantization config.json declares (also compressed-tensors' older key), or None."""
    if not config:
        return None
    declared = config.get("quantization_config") or config.get("compression_config")
    if not isinstance(declared, dict):
        return None
    method = str(declared.get("quant_method") or "unknown method")
    if method == "compressed-tensors":
        return _compressed_tensors(declared)
    bits = declared.get("bits") or declared.get("w_bit")
    group = declared.get("group_size") or declared.get("q_group_size")
    if method == "bitsandbytes":
        if declared.get("load_in_4bit"):
            kind = str(declared.get("bnb_4bit_quant_type") or "4-bit").upper()
            return QuantScheme("bitsandbytes", format=kind, bits=4)
        return QuantScheme("bitsandbytes", bits=8 if declared.get("load_in_8bit") else None)
    block = declared.get("weight_block_size")
    return QuantScheme(
        _method_name(method),
        bits=int(bits) if isinstance(bits, int) else None,
        group_size=int(group) if isinstance(group, int) else None,
        block=[int(size) for size in block] if isinstance(block, list) else None,
    )


def _method_name(method: str) -> str:
    return {"gptq": "GPTQ", "awq": "AWQ", "fp8": "FP8", "gptq_marlin": "GPTQ"}.get(method, method)


def _compressed_tensors(declared: dict[str, Any]) -> QuantScheme:
    groups = declared.get("config_groups") or {}
    weights: dict[str, Any] = {}
    for group in groups.values() if isinstance(groups, dict) else []:
        if isinstance(group, dict) and isinstance(group.get("weights"), dict):
            weights = group["weights"]
            break
    bits = weights.get("num_bits")
    size = weights.get("group_size")
    block = weights.get("block_structure")
    return QuantScheme(
        "compressed-tensors",
        format=str(declared.get("format")) if declared.get("format") else None,
        bits=int(bits) if isinstance(bits, int) else None,
        group_size=int(size) if isinstance(size, int) else None,
        strategy=str(weights.get("strategy")) if weights.get("strategy") else None,
        block=[int(part) for part in block] if isinstance(block, list) else None,
    )


def suffix_of(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def is_auxiliary(record: TensorRecord) -> bool:
    return suffix_of(record.name) in AUXILIARY_SUFFIXES


def _dtype_words(tensors: list[TensorRecord]) -> str:
    """`BF16`, or `BF16 (98.1%), F32 (1.9%)` when several dtypes hold the bytes."""
    by_dtype: Counter[str] = Counter()
    for record in tensors:
        by_dtype[record.dtype] += record.nbytes
    total = sum(by_dtype.values())
    ranked = [dtype for dtype, _ in by_dtype.most_common()]
    if len(ranked) <= 1 or total == 0:
        return ranked[0] if ranked else "empty"
    return ", ".join(f"{dtype} ({by_dtype[dtype] / total:.1%})" for dtype in ranked)


def _scale_dtype(tensors: list[TensorRecord], suffixes: tuple[str, ...]) -> str | None:
    dtypes = Counter(r.dtype for r in tensors if suffix_of(r.name) in suffixes)
    return dtypes.most_common(1)[0][0] if dtypes else None


def describe_storage(tensors: list[TensorRecord], scheme: QuantScheme | None, gguf: bool) -> str:
    """One group's storage in words: 'packed 4-bit, compressed-tensors, group 32, BF16 scales'."""
    if not tensors:
        return "empty"
    if gguf:
        return "GGUF " + _dtype_words(tensors)
    packed = [r for r in tensors if suffix_of(r.name) in PACKED_SUFFIXES]
    fp8 = [r for r in tensors if r.dtype.startswith("F8") and not is_auxiliary(r)]
    bnb = [r for r in tensors if suffix_of(r.name) == "absmax" or "quant_state" in r.name]
    if packed:
        words = _packed_words(tensors, packed, scheme)
        quantized = {r.name.rsplit(".", 1)[0] for r in packed}
    elif fp8:
        words = _fp8_words(tensors, fp8, scheme)
        quantized = {r.name.rsplit(".", 1)[0] for r in fp8}
    elif bnb and scheme is not None and scheme.method == "bitsandbytes":
        return scheme.words()
    else:
        return _dtype_words(tensors)
    rest = [r for r in tensors if r.name.rsplit(".", 1)[0] not in quantized and not is_auxiliary(r)]
    group_bytes = sum(r.nbytes for r in tensors)
    rest_bytes = sum(r.nbytes for r in rest)
    if rest and group_bytes and rest_bytes / group_bytes >= PACKED_SHARE_FLOOR:
        words += f"; the rest {_dtype_words(rest)} ({rest_bytes / group_bytes:.0%} of the bytes)"
    return words


def _packed_words(
    tensors: list[TensorRecord], packed: list[TensorRecord], scheme: QuantScheme | None
) -> str:
    compressed = any(suffix_of(r.name) == "weight_packed" for r in packed)
    method = "compressed-tensors" if compressed else "GPTQ/AWQ"
    if scheme is not None and scheme.method in ("GPTQ", "AWQ", "compressed-tensors"):
        method = scheme.method
    bits = f"{scheme.bits}-bit" if scheme and scheme.bits else "low-bit (config.json names no bits)"
    parts = [f"packed {bits}", method]
    if scheme and scheme.group_size and scheme.group_size > 0:
        parts.append(f"group {scheme.group_size}")
    elif scheme and scheme.strategy:
        parts.append(f"per {scheme.strategy}")
    scale = _scale_dtype(tensors, ("weight_scale", "scales"))
    if scale:
        parts.append(f"{scale} scales")
    return ", ".join(parts)


def _fp8_words(
    tensors: list[TensorRecord], fp8: list[TensorRecord], scheme: QuantScheme | None
) -> str:
    dtype = Counter(r.dtype for r in fp8).most_common(1)[0][0]
    scales = [r for r in tensors if suffix_of(r.name) in ("weight_scale", "weight_scale_inv")]
    if scheme and scheme.block:
        how = "block " + "×".join(str(size) for size in scheme.block) + " scales"
    elif scales and all(len(r.shape) == 0 or r.shape == (1,) for r in scales):
        how = "per-tensor scales"
    elif scales:
        how = "per-channel scales"
    else:
        how = "no scales found"
    return f"FP8 ({dtype}), {how}"
