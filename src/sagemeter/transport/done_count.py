"""Requests finished so far, across worker processes, for a live progress line.

The parent makes a small file of one 8-byte slot per worker; each worker maps it and writes its
own count when a request finishes (one memory write, nothing on the wire), and the parent reads
the sum whenever it redraws. Workers on other machines (Ray) get no file and count nothing.

A second block of slots, one per worker, counts requests that missed an SLO (`transport/slo_stop`):
every worker reads the sum, so a probe stops as soon as the misses of all workers together say it
cannot pass.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import tempfile

_SLOT = struct.Struct("=Q")


class DoneCount:
    """The parent's side: the file, and the sum of every worker's slot."""

    def __init__(self, workers: int) -> None:
        handle, name = tempfile.mkstemp(prefix="sagemeter-done-", suffix=".bin")
        self.path = name
        self.workers = workers
        with os.fdopen(handle, "wb") as file:
            file.write(bytes(_SLOT.size * workers * 2))

    def total(self) -> int:
        """Requests finished so far by every worker (0 when the file is gone)."""
        try:
            with open(self.path, "rb") as file:
                data = file.read(_SLOT.size * self.workers)
        except OSError:
            return 0
        count = len(data) // _SLOT.size
        return sum(_SLOT.unpack_from(data, i * _SLOT.size)[0] for i in range(count))

    def misses(self) -> int:
        """Requests that missed the SLO so far, by every worker (0 when the file is gone)."""
        try:
            with open(self.path, "rb") as file:
                data = file.read()
        except OSError:
            return 0
        count = len(data) // _SLOT.size
        return sum(_SLOT.unpack_from(data, i * _SLOT.size)[0] for i in range(count // 2, count))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path)


class DoneSlot:
    """A worker's side: its slot of the parent's file; a no-op when there is none."""

    def __init__(self, path: str, worker: int) -> None:
        self.count = 0
        self.missed = 0
        self.offset = worker * _SLOT.size
        self.miss_offset = 0
        self.map: mmap.mmap | None = None
        if not path:
            return
        try:
            with open(path, "r+b") as file:
                self.map = mmap.mmap(file.fileno(), 0)
        except (OSError, ValueError):
            self.map = None
        if self.map is not None and len(self.map) < self.offset + _SLOT.size:
            self.map.close()
            self.map = None
        if self.map is not None:
            self.miss_offset = len(self.map) // 2 + self.offset

    def miss(self) -> int:
        """One more request missed the SLO; the misses of every worker so far (this worker's own
        when there is no file)."""
        self.missed += 1
        if self.map is None:
            return self.missed
        _SLOT.pack_into(self.map, self.miss_offset, self.missed)
        half = len(self.map) // 2
        return sum(
            _SLOT.unpack_from(self.map, at)[0] for at in range(half, len(self.map), _SLOT.size)
        )

    def bump(self) -> None:
        """One more request finished."""
        self.count += 1
        if self.map is not None:
            _SLOT.pack_into(self.map, self.offset, self.count)

    def close(self) -> None:
        if self.map is not None:
            self.map.close()
            self.map = None
