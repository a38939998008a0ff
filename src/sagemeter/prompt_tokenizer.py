"""The model's own tokenizer, for a server that does not count prompts (no `usage.prompt_tokens`).

Byte-level BPE, the scheme of GPT-2 and of most models sagemeter serves (SmolLM2, Llama 3,
Qwen, Mistral's newer ones): the text is cut into pieces by the pre-tokenizer's rule, each
piece's bytes spelled as GPT-2's printable characters, then pairs are merged by rank until no
ranked pair is left. The vocabulary and merges come from a GGUF file (`tokenizer.ggml.tokens`,
`tokenizer.ggml.merges`, model `gpt2`) or a Hugging Face folder's `tokenizer.json` (model
`BPE`); anything else (SentencePiece, WordPiece) is refused in one line.

What it counts is the prompt's text alone: the chat template's tokens around it are not known
here. They are the same for every prompt, so they cancel in the prefill rate's difference; the
per-call fixed cost then holds their time.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from sagemeter.errors import UserError
from sagemeter.gguf_open import open_gguf
from sagemeter.textfiles import TOKENIZER_CAP, read_json

# GPT-2's pre-tokenizer, with Python's `re` classes for \p{L} (letters) and \p{N} (digits).
_LETTERS, _DIGITS, _OTHER = r"[^\W\d_]", r"\d", r"(?:[^\s\w]|_)"
_CONTRACTIONS = r"'s|'t|'re|'ve|'m|'ll|'d"
_SPACES = r"\s+(?!\S)|\s+"
PIECES = {
    # GPT-2: runs of digits.
    "run": re.compile(rf"{_CONTRACTIONS}| ?{_LETTERS}+| ?{_DIGITS}+| ?{_OTHER}+|{_SPACES}"),
    # SmolLM, StarCoder: each digit alone, first.
    "single": re.compile(rf"{_DIGITS}|{_CONTRACTIONS}| ?{_LETTERS}+| ?{_OTHER}+|{_SPACES}"),
    # Llama 3, Qwen 2: up to three digits at a time.
    "three": re.compile(rf"{_DIGITS}{{1,3}}|{_CONTRACTIONS}| ?{_LETTERS}+| ?{_OTHER}+|{_SPACES}"),
}
# llama.cpp's pre-tokenizer names (`tokenizer.ggml.pre`) by how they cut digits.
GGUF_DIGITS = {
    "smollm": "single",
    "starcoder": "single",
    "refact": "single",
    "deepseek-coder": "single",
    "llama3": "three",
    "llama-bpe": "three",
    "qwen2": "three",
    "tekken": "three",
    "dbrx": "three",
    "smaug-bpe": "three",
}


def _byte_spelling() -> dict[int, str]:
    """GPT-2's map from each byte to a printable character (bytes_to_unicode)."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    spelled = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in spelled:
            spelled[b] = chr(256 + extra)
            extra += 1
    return spelled


BYTES = _byte_spelling()


@dataclass
class PromptTokenizer:
    """A byte-level BPE tokenizer that counts tokens; `source` names where it was read."""

    vocab: set[str]
    ranks: dict[tuple[str, str], int]
    digits: str
    source: str

    def __post_init__(self) -> None:
        self._piece_count = functools.lru_cache(maxsize=65536)(self._count_piece)

    def count(self, text: str) -> int:
        """Tokens of `text`, no special tokens added."""
        return sum(self._piece_count(piece) for piece in PIECES[self.digits].findall(text))

    def _count_piece(self, piece: str) -> int:
        parts = [BYTES[b] for b in piece.encode("utf-8")]
        while len(parts) > 1:
            pairs = [(self.ranks.get(pair), i) for i, pair in enumerate(itertools.pairwise(parts))]
            ranked = [(rank, i) for rank, i in pairs if rank is not None]
            if not ranked:
                break
            _, at = min(ranked)
            parts[at : at + 2] = [parts[at] + parts[at + 1]]
        return sum(1 if part in self.vocab else len(part.encode("utf-8")) for part in parts)


def _ranks(merges: list[str] | list[list[str]]) -> dict[tuple[str, str], int]:
    ranks: dict[tuple[str, str], int] = {}
    for rank, merge in enumerate(merges):
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        ranks.setdefault((left, right), rank)
    return ranks


def check_tokenizer_path(path: Path) -> Path:
    """The path, absolute, when it can hold a tokenizer (before any work: the file is read
    only when a server gives no count); else one UserError."""
    folder_ok = path.is_dir() and (path / "tokenizer.json").is_file()
    if not (folder_ok or (path.suffix == ".gguf" and path.is_file())):
        raise UserError(
            f"--tokenizer {path}: give a .gguf file or a folder holding tokenizer.json (a "
            "Hugging Face model's)"
        )
    return path.resolve()


def load_tokenizer(path: Path) -> PromptTokenizer:
    """A GGUF file or a folder holding tokenizer.json; a problem is one UserError naming it."""
    if path.is_dir():
        return _from_hf(path)
    if path.suffix == ".gguf" and path.is_file():
        return _from_gguf(path)
    raise UserError(
        f"--tokenizer {path}: give a .gguf file or a folder holding tokenizer.json (a Hugging "
        "Face model's)"
    )


def _from_gguf(path: Path) -> PromptTokenizer:
    reader = open_gguf(path, "--tokenizer")
    fields = {
        key: reader.get_field(f"tokenizer.ggml.{key}")
        for key in ("model", "pre", "tokens", "merges")
    }
    model = str(fields["model"].contents()) if fields["model"] is not None else None
    if model != "gpt2" or fields["tokens"] is None or fields["merges"] is None:
        raise UserError(
            f"--tokenizer {path}: its tokenizer is {model or 'not named'}, not byte-level BPE "
            "(gpt2 with merges); sagemeter counts only byte-level BPE prompts"
        )
    pre = str(fields["pre"].contents()) if fields["pre"] is not None else "gpt2"
    return PromptTokenizer(
        vocab={str(token) for token in fields["tokens"].contents()},
        ranks=_ranks([str(merge) for merge in fields["merges"].contents()]),
        digits=GGUF_DIGITS.get(pre, "run"),
        source=f"GGUF {path.name} (pre-tokenizer {pre})",
    )


def _from_hf(folder: Path) -> PromptTokenizer:
    path = folder / "tokenizer.json"
    spec = read_json(path, TOKENIZER_CAP, "--tokenizer")
    try:
        model = spec["model"]
        kind, vocab, merges = model.get("type"), model["vocab"], model["merges"]
        if not isinstance(vocab, dict) or not isinstance(merges, list):
            raise TypeError("vocab is no mapping or merges no list")
    except (KeyError, TypeError, AttributeError):
        raise UserError(
            f"--tokenizer {path}: no BPE model (model.vocab and model.merges) in it"
        ) from None
    pre = json.dumps(spec.get("pre_tokenizer"))
    if kind != "BPE" or "ByteLevel" not in pre:
        raise UserError(
            f"--tokenizer {folder}: its tokenizer.json is {kind or 'untyped'} without a "
            "byte-level pre-tokenizer; sagemeter counts only byte-level BPE prompts"
        )
    digits = "run"
    if '"individual_digits": true' in pre:
        digits = "single"
    elif "\\\\p{N}{1,3}" in pre:
        digits = "three"
    try:
        added = {str(token["content"]) for token in spec.get("added_tokens") or []}
        ranks = _ranks(merges)
    except (KeyError, TypeError, ValueError):
        raise UserError(
            f"--tokenizer {path}: its added_tokens or merges are not of the tokenizers shape"
        ) from None
    return PromptTokenizer(
        vocab={*map(str, vocab), *added},
        ranks=ranks,
        digits=digits,
        source=f"tokenizer.json of {folder.name}",
    )


_TOKENIZERS: dict[Path, PromptTokenizer] = {}


def tokenizer_at(path: str) -> PromptTokenizer:
    """The tokenizer at `path` (checked: LoadSettings), read once per process (a GGUF's
    vocabulary takes seconds, and an engine target or a search checks and runs in one)."""
    key = Path(path).resolve()
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = load_tokenizer(key)
    return _TOKENIZERS[key]
