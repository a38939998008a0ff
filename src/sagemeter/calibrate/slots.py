"""A slot limit: at most k generations served at once, the rest wait in arrival order.

A real engine has a batch limit (vLLM's max_num_seqs, llama.cpp's slots); past it requests queue
and their time to first token grows by the wait. With a known limit the server's true operating
point is known too: k streams at once meet a TTFT target just above `ttft`, k + 1 do not. A
queued request's reply starts when a slot frees and counts its TTFT from its arrival, so the
wait is in what the client sees, as on a real server.

The arrival log writes one JSON line per generation request (its true arrival from the kernel's
stamp, when its service started, how long it queued), so a test can check a client's send times
against the server's own record.
"""

from __future__ import annotations

import functools
import json
import time
from collections import deque
from collections.abc import Callable
from typing import IO

from sagemeter.calibrate.streams import Sink

# A queued reply's start: called with the instant (monotonic) its slot freed.
Start = Callable[[float], None]


class SlotGate:
    """Counts replies in service; a start beyond `slots` waits for a release (None: no limit)."""

    def __init__(self, slots: int | None, schedule_soon: Callable[[Callable[[], None]], object]):
        if slots is not None and slots < 1:
            raise ValueError("slots must be at least 1")
        self.slots = slots
        self._soon = schedule_soon
        self.in_service = 0
        self.waiting: deque[tuple[SlotSink, Start]] = deque()
        self.queued_total = 0
        self.wait_max_s = 0.0

    def admit(self, sink: SlotSink, arrived: float, start: Start) -> None:
        """Start now (counting from `arrived`) if a slot is free, else queue."""
        if self.slots is None or self.in_service < self.slots:
            self.in_service += 1
            sink.holding = True
            start(arrived)
            return
        self.queued_total += 1
        self.waiting.append((sink, start))

    def release(self) -> None:
        """A reply ended (or its connection closed): the next live queued reply starts."""
        self.in_service -= 1
        freed = time.monotonic()
        while self.waiting:
            sink, start = self.waiting.popleft()
            if sink.gone:
                continue  # its client gave up while it waited
            self.in_service += 1
            sink.holding = True
            # Not from inside the scheduler's flush (a release happens there): a loop turn later,
            # with the slot's freeing instant as its start.
            self._soon(functools.partial(start, freed))
            return


class SlotSink:
    """The connection as a reply sees it, releasing the reply's slot once when it ends (a
    reply still queued holds none)."""

    __slots__ = ("_gate", "_released", "_sink", "holding")

    def __init__(self, sink: Sink, gate: SlotGate) -> None:
        self._sink = sink
        self._gate = gate
        self._released = False
        self.holding = False

    def _release(self) -> None:
        if self.holding and not self._released:
            self._released = True
            self._gate.release()

    @property
    def gone(self) -> bool:
        """The client closed the connection (nothing released)."""
        return self._sink.closed

    @property
    def closed(self) -> bool:
        if self._sink.closed:
            self._release()  # the client went away: its slot is free again
            return True
        return False

    def write(self, data: bytes) -> None:
        self._sink.write(data)

    def finished(self) -> None:
        self._release()
        self._sink.finished()

    def close(self) -> None:
        self._release()
        self._sink.close()


class ArrivalLog:
    """One JSON line per generation request, flushed as written (a reader may follow it live).

    Lines (and request numbers) are in the order the server read the requests. Arrival times are
    the kernel's stamps where it gives them, so two requests arriving within a millisecond or so
    of each other on different connections may carry stamps in the other order.

    Times are Unix seconds (wall clock) converted from the monotonic instants the server keeps,
    so they sit on the same clock as a client's `started_utc`.
    """

    def __init__(self, file: IO[str]) -> None:
        self._file = file
        self._count = 0

    def write(self, arrived: float, started: float) -> None:
        self._count += 1
        to_wall = time.time() - time.monotonic()
        line = {
            "request": self._count,
            "arrived_unix": round(arrived + to_wall, 6),
            "started_unix": round(started + to_wall, 6),
            "queued_s": round(max(started - arrived, 0.0), 6),
        }
        self._file.write(json.dumps(line) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()
