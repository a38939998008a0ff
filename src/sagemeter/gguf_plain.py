"""The `gguf` package's reader over a plain array: the same parse, without numpy's memmap hooks.

The package slices its memory map once or more per field part: about a million slices for the
vocabulary, each paying numpy's memmap subclass hooks (`__getitem__`, `__array_finalize__`), two
thirds of the parse. A plain ndarray view of the same map holds the same bytes and keeps the map
open, and parses 2.7 times faster (docs/benchmarks/start-up.md), field for field and tensor for
tensor the same.

This module imports nothing of sagemeter's: the export script that runs in vLLM's own environment
(engines/hf_export_script.py) loads it by its path, so transformers' GGUF loading parses fast too.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from gguf import GGUFReader


@functools.cache
def plain_reader_class() -> type[GGUFReader]:
    """A GGUFReader subclass whose `data` (the whole file's memory map) is a plain ndarray."""
    import numpy as np
    from gguf import GGUFReader

    class PlainArrayReader(GGUFReader):
        @property  # type: ignore[override]
        def data(self) -> np.ndarray:
            return self._plain_data

        @data.setter
        def data(self, mapped: np.ndarray) -> None:
            self._plain_data = mapped.view(np.ndarray)

    return PlainArrayReader
