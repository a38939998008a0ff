"""A text stream that passes everything to the one it wraps, for wrappers that change one thing.

The terminal's streams are wrapped twice (redaction, and surviving a closed terminal); each
wrapper overrides what it changes and leaves the rest (`fileno`, `encoding`, the binary `buffer`
the MCP stdio transport writes to) to this base.
"""

from __future__ import annotations

from typing import TextIO


class DelegatingStream:
    """`stream`'s writes, flushes and attributes, unchanged (subclasses override)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:
        return str(getattr(self._stream, "encoding", "utf-8"))

    def __getattr__(self, name: str) -> object:
        # Anything else (`buffer`, `errors`, `line_buffering`) is the wrapped stream's.
        return getattr(self._stream, name)
