"""A model's vocabulary as a fingerprint: the tokenizer's own id → token map, hashed.

Two records compare position by position only when a token id means the same token in both.
The text a server renders for a token says little about that (vLLM spells `<|im_end|>` out where
llama.cpp writes nothing; both drop an incomplete UTF-8 byte differently), so where sagemeter
has the checkpoint's own tokenizer (it started the server) the record carries the SHA-256 of the
id-ordered token list: from a GGUF file's `tokenizer.ggml.tokens`, or a Hugging Face folder's
`tokenizer.json` (its vocabulary plus added tokens). A GGUF converted from a Hugging Face model
and that model's folder hold the same list, so the fingerprints of the two engines match.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from sagemeter.errors import UserError
from sagemeter.gguf_open import open_gguf
from sagemeter.results.fidelity_record import Vocabulary
from sagemeter.textfiles import TOKENIZER_CAP, read_json


def fingerprint(tokens: list[str], source: str) -> Vocabulary:
    """The fingerprint of an id-ordered token list."""
    encoded = json.dumps(tokens, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return Vocabulary(size=len(tokens), sha256=hashlib.sha256(encoded).hexdigest(), source=source)


def gguf_vocabulary(path: Path) -> Vocabulary:
    """From a GGUF file's token list (read once per file version: it parses for seconds)."""
    stat = path.stat()
    return _gguf_cached(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _gguf_cached(path: str, size: int, mtime_ns: int) -> Vocabulary:
    field = open_gguf(path).get_field("tokenizer.ggml.tokens")
    if field is None:
        raise UserError(
            f"{path}: no tokenizer.ggml.tokens; not a llama.cpp model with a vocabulary"
        )
    tokens = [str(token) for token in field.contents()]
    return fingerprint(tokens, f"GGUF {Path(path).name}")


def hf_vocabulary(folder: Path) -> Vocabulary:
    """From a Hugging Face folder's tokenizer.json: the model's vocabulary and added tokens."""
    path = folder / "tokenizer.json"
    try:
        spec = read_json(path, TOKENIZER_CAP)
        by_id: dict[int, str] = {int(i): str(t) for t, i in spec["model"]["vocab"].items()}
        for added in spec.get("added_tokens", []):
            by_id[int(added["id"])] = str(added["content"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise UserError(f"{path}: no readable BPE/WordPiece vocabulary") from None
    size = max(by_id) + 1 if by_id else 0
    # An id the tokenizer never names is spelled as llama.cpp's converter spells it.
    tokens = [by_id.get(i, f"[PAD{i}]") for i in range(size)]
    return fingerprint(tokens, f"tokenizer.json of {folder.name}")
