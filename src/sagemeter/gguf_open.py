"""Opening a GGUF file a person named: the parsed reader, or one UserError line naming the file.

The `gguf` package parses a damaged file (a copy cut short, counts that are absurd, a file that
only starts with the magic) by failing somewhere inside numpy or its own tables: ValueError,
KeyError ("Duplicate already in list"), IndexError, struct errors or a memory error. Every
reader of a user's GGUF (inspect, --tokenizer, fidelity's vocabulary, the checkpoint summary)
opens it here, so each of those is the same line instead of a traceback.
"""

from __future__ import annotations

import functools
import struct
from pathlib import Path
from typing import TYPE_CHECKING

from sagemeter.errors import UserError
from sagemeter.gguf_plain import plain_reader_class

if TYPE_CHECKING:
    from gguf import GGUFReader

# What the package raises on a file that is not a whole GGUF (its own parsing, not our code).
DAMAGED = (OSError, ValueError, KeyError, IndexError, TypeError, OverflowError, MemoryError,
           struct.error)  # fmt: skip


def open_gguf(path: Path | str, what: str = "") -> GGUFReader:
    """The `gguf` package's reader for `path`; `what` names its role in the message.

    The reader parses every field, the vocabulary's ~100,000 strings included (2.3 s of CPU for
    the 135M model's file on a slow two-core host), and one measurement of a local checkpoint
    reads the file for its summary, its facts, its tokenizer and its vocabulary: one parse per
    file version serves them all (the readers are read-only, over a memory map of the file).
    """
    try:
        from gguf import GGUFReader  # noqa: F401 (the message below, before any parse)
    except ImportError:
        raise UserError(
            "reading GGUF files needs the `gguf` package: pip install 'sagemeter[local]'"
        ) from None
    label = f"{what} {path}" if what else str(path)
    try:
        stat = Path(path).stat()
        return _parsed(str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)
    except DAMAGED as exc:
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise UserError(f"{label}: not a readable GGUF file ({reason})") from None


@functools.lru_cache(maxsize=4)
def _parsed(path: str, size: int, mtime_ns: int) -> GGUFReader:
    """One parse per file version (a file written again gets a new size or mtime)."""
    return read_gguf(path)


def read_gguf(path: Path | str) -> GGUFReader:
    """A new parse of `path` by the `gguf` package's reader, over a plain array (`gguf_plain`:
    2.7 times faster, the same fields and tensors)."""
    return plain_reader_class()(str(path))
