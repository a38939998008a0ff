"""Runs inside the vLLM environment (torch, transformers, gguf): GGUF file → Hugging Face folder.

Usage: `python hf_export_script.py MODEL.gguf OUT_DIR`. It is run by file path with that
environment's Python, never imported by sagemeter itself (sagemeter's own environment has no
torch). It prints one JSON line: tensors, parameters, whether every weight is exact, the files.

transformers reads the GGUF (`gguf_file=`), un-permuting llama.cpp's Q/K layout and turning the
GGUF vocabulary into a tokenizer. Its model then carries a GGUF `quantization_config` that
`save_pretrained` refuses, so a fresh model is built from the config without it and the tensors
are copied over unchanged. Exactness is then checked against the file itself: every saved tensor
must hold bit for bit the values of one GGUF tensor (compared as sorted bit patterns, which is
blind to the row order llama.cpp permuted, so a wrong un-permutation would show up only in the
outputs; the fidelity test compares those against llama.cpp).

Every GGUF parse here uses sagemeter's plain-array reader (`gguf_plain.py`, loaded by its path,
as sagemeter is not installed here): the same fields and tensors, 2.7 times less CPU. And each is
made once: transformers reads the file three times (config, tokenizer, weights) and the check
once more, all read-only, so they share one reader; and transformers builds gguf's tensor-name
map afresh for every module of the model (397 times for SmolLM2, the same two arguments each
time, read-only), so it is built once per architecture and block count. The two took the export
from 32.0 s to 20.7 s of CPU (SmolLM2-135M F32, 2 cores: medians of three, alternated).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

PLAIN_READER = Path(__file__).resolve().parents[1] / "gguf_plain.py"


def use_plain_reader() -> None:
    """`gguf.GGUFReader` becomes the plain-array reader, for transformers and for this script."""
    import gguf

    spec = importlib.util.spec_from_file_location("sagemeter_gguf_plain", PLAIN_READER)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{PLAIN_READER}: cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    gguf.GGUFReader = module.plain_reader_class()  # type: ignore[misc]


def parse_once() -> None:
    """One reader per file and one tensor-name map per architecture, shared (see above)."""
    import gguf

    reader_class = gguf.GGUFReader
    readers: dict[tuple[str, str], Any] = {}

    def shared_reader(path: str | Path, mode: str = "r") -> Any:
        key = (str(Path(path).resolve()), mode)
        if key not in readers:
            readers[key] = reader_class(path, mode)  # type: ignore[arg-type]
        return readers[key]

    gguf.GGUFReader = shared_reader  # type: ignore[assignment, misc]
    gguf.get_tensor_name_map = functools.cache(gguf.get_tensor_name_map)


def _fingerprint(bits: object) -> str:
    import numpy as np

    array = np.ascontiguousarray(np.sort(np.asarray(bits).ravel()))
    return hashlib.sha256(array.tobytes()).hexdigest()


def gguf_fingerprints(path: Path) -> Counter[str]:
    import gguf
    import numpy as np
    from gguf.quants import dequantize

    reader = gguf.GGUFReader(str(path))
    found: Counter[str] = Counter()
    for tensor in reader.tensors:
        values = dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        found[_fingerprint(values.view(np.uint32))] += 1
    return found


def saved_fingerprints(folder: Path) -> tuple[Counter[str], int, int]:
    import numpy as np
    from safetensors.numpy import load_file

    found: Counter[str] = Counter()
    parameters = 0
    count = 0
    for shard in sorted(folder.glob("*.safetensors")):
        for array in load_file(str(shard)).values():
            if array.dtype != np.float32:
                raise SystemExit(f"{shard.name}: a tensor saved as {array.dtype}, not float32")
            found[_fingerprint(array.view(np.uint32))] += 1
            parameters += int(array.size)
            count += 1
    return found, count, parameters


def export(source: Path, out: Path) -> dict[str, object]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = AutoModelForCausalLM.from_pretrained(
        source.parent, gguf_file=source.name, dtype=torch.float32
    )
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = torch.float32
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    fresh.load_state_dict(loaded.state_dict(), strict=True)
    fresh.generation_config = loaded.generation_config
    fresh.save_pretrained(out, safe_serialization=True)
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    tokenizer.save_pretrained(out)

    expected = gguf_fingerprints(source)
    saved, count, parameters = saved_fingerprints(out)
    missing = saved - expected  # saved tensors whose values no GGUF tensor holds
    return {
        "tensors": count,
        "parameters": parameters,
        "exact": not missing,
        "inexact_tensors": sum(missing.values()),
        "chat_template": bool(tokenizer.chat_template),
        "files": sorted(path.name for path in out.iterdir() if path.is_file()),
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: hf_export_script.py MODEL.gguf OUT_DIR", file=sys.stderr)
        return 2
    source, out = Path(argv[0]), Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    use_plain_reader()
    parse_once()
    print(json.dumps(export(source, out)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
