"""Requests finished so far, across worker processes, for a live progress line.

The parent makes a small file of one 8-byte slot per worker; each worker maps it and writes its
own count when a request finishes (one memory write, nothing on the wire), and the parent reads
the sum whenever it redraws. Workers on other machines (Ray) get no file and count nothing.

The file has no name (`tempfile.TemporaryFile`): the workers inherit its descriptor when they
are started (`WorkerPool(shared_fd=...)`), so a command killed at any instant, even by SIGKILL,
leaves nothing behind in the temporary folder.

A second block of slots, one per worker, counts requests that missed an SLO (`transport/slo_stop`):
every worker reads the sum, so a probe stops as soon as the misses of all workers together say it
cannot pass.
"""

from __future__ import annotations

import mmap
import os
import struct
import tempfile

_SLOT = struct.Struct("=Q")


class DoneCount:
    """The parent's side: the file, and the sum of every worker's slot."""

    def __init__(self, workers: int) -> None:
        self.file = tempfile.TemporaryFile(prefix="sagemeter-done-")  # noqa: SIM115 (closed by close())
        self.workers = workers
        self.file.write(bytes(_SLOT.size * workers * 2))
        self.file.flush()
        self.fd = self.file.fileno()  # what each worker is handed (`WorkerPlan.done_fd`)

    def _slots(self, first: int, count: int) -> int:
        """The sum of `count` slots from slot `first` (0 once the file is closed)."""
        try:
            data = os.pread(self.fd, _SLOT.size * count, _SLOT.size * first)
        except (OSError, ValueError):
            return 0
        slots = range(len(data) // _SLOT.size)
        return sum(_SLOT.unpack_from(data, i * _SLOT.size)[0] for i in slots)

    def total(self) -> int:
        """Requests finished so far by every worker."""
        return self._slots(0, self.workers)

    def misses(self) -> int:
        """Requests that missed the SLO so far, by every worker."""
        return self._slots(self.workers, self.workers)

    def close(self) -> None:
        self.file.close()


class DoneSlot:
    """A worker's side: its slot of the parent's file, by the descriptor it inherited; a no-op
    when there is none (-1)."""

    def __init__(self, fd: int, worker: int) -> None:
        self.count = 0
        self.missed = 0
        self.offset = worker * _SLOT.size
        self.miss_offset = 0
        self.map: mmap.mmap | None = None
        if fd < 0:
            return
        try:
            self.map = mmap.mmap(fd, 0)
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
