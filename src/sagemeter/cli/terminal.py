"""Output that outlives its terminal: a closed SSH session or window must not stop the cleanup.

When the terminal goes away the kernel sends SIGHUP, and every later write to it fails (EIO for
a terminal, EPIPE for a pipe whose reader has gone). The stop path then draws a progress bar's
last frame or a step's line before it deletes an endpoint or stops an engine; a write that
raised there would end the process with the endpoint still up. So the process's stdout and
stderr are wrapped once (`keep_writing`): a write to a stream that has gone is dropped and
remembered, and the command goes on to its cleanup and its exit code.
"""

from __future__ import annotations

import errno
import sys
from typing import TextIO

from sagemeter.streams import DelegatingStream

GONE = frozenset({errno.EIO, errno.EPIPE, errno.ENXIO, errno.EBADF})


class SurvivingStream(DelegatingStream):
    """A text stream whose writes and flushes never raise once the reader has gone."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.gone: str | None = None  # why writes are dropped (the first failure), once they are

    def _lost(self, exc: OSError | ValueError) -> None:
        if self.gone is None:
            self.gone = str(exc.strerror if isinstance(exc, OSError) else exc) or "closed"

    def write(self, text: str) -> int:
        if self.gone is not None:
            return len(text)
        try:
            return self._stream.write(text)
        except OSError as exc:
            if exc.errno not in GONE:
                raise
            self._lost(exc)
        except ValueError as exc:  # "I/O operation on closed file"
            self._lost(exc)
        return len(text)

    def flush(self) -> None:
        if self.gone is not None:
            return
        try:
            self._stream.flush()
        except OSError as exc:
            if exc.errno not in GONE:
                raise
            self._lost(exc)
        except ValueError as exc:
            self._lost(exc)

    def isatty(self) -> bool:
        try:
            return self.gone is None and self._stream.isatty()
        except (OSError, ValueError):
            return False


def keep_writing() -> None:
    """Wrap this process's stdout and stderr (once) so a terminal that went away never raises."""
    if not isinstance(sys.stdout, SurvivingStream):
        sys.stdout = SurvivingStream(sys.stdout)
    if not isinstance(sys.stderr, SurvivingStream):
        sys.stderr = SurvivingStream(sys.stderr)


def stdout_lost() -> str | None:
    """Why the command's output on stdout did not all arrive, if it did not."""
    stream = sys.stdout
    return stream.gone if isinstance(stream, SurvivingStream) else None
