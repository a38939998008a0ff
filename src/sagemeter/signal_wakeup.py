"""An asyncio loop that a signal always wakes: Ctrl-C (or SIGTERM, SIGHUP) is obeyed at once.

Python runs a signal's handler in the main thread between two bytecodes; the kernel-level part
only marks it pending. asyncio.run (asyncio.Runner) takes Ctrl-C with such a handler, which
cancels the main task, but nothing wakes the loop to run it when the mark lands after the
loop's last look and before it blocks in epoll (the main thread preempted just there, which a
busy host makes common), or when the kernel hands the signal to another thread. An idle loop
then sleeps on: `sagemeter calibrate-server` went on serving after a Ctrl-C until killed, and a
`cmd:` server behind `serve` held its stop for the launcher's whole grace period. asyncio asks
the kernel-level handler to write to the loop's wake-up socket (signal.set_wakeup_fd) only for
loop.add_signal_handler, which asyncio.run does not use; `woken_by_signals` does it for any loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


@contextlib.contextmanager
def woken_by_signals(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """While inside, every signal with a Python handler wakes `loop`, so its handler runs at
    once. Only the main thread receives Python's signal handlers: elsewhere this does nothing.
    A loop that already watches such a socket (uvloop, a loop with add_signal_handler) keeps
    working the same; the previous wake-up target is put back on leaving."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    try:
        loop.add_reader(reader.fileno(), _drain, reader)
        try:
            previous: int | None = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        except ValueError:  # signals are not Python's to handle in this interpreter
            previous = None
        if previous is None:
            loop.remove_reader(reader.fileno())
            yield  # outside the except: the body's own errors are not "during a ValueError"
            return
        try:
            yield
        finally:
            _hand_back(previous, writer.fileno())
            loop.remove_reader(reader.fileno())
    finally:
        reader.close()
        writer.close()


def _hand_back(previous: int, ours: int) -> None:
    """Put the wake-up target back as it was before, unless an owner inside took it over (a
    loop's add_signal_handler) and still holds it: its choice stands. Never raises, so an
    error here cannot hide the KeyboardInterrupt that may be on its way out."""
    with contextlib.suppress(OSError, ValueError):
        current = signal.set_wakeup_fd(previous)
        if current not in (ours, -1):
            signal.set_wakeup_fd(current)


def _drain(reader: socket.socket) -> None:
    """The bytes are only a wake-up (the handlers themselves run from the interpreter)."""
    with contextlib.suppress(BlockingIOError, InterruptedError):
        while reader.recv(4096):
            pass


def run(
    coroutine: Coroutine[Any, Any, T],
    *,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
) -> T:
    """asyncio.run(coroutine), the same Ctrl-C behaviour (the first cancels the main task and
    ends in KeyboardInterrupt, a second interrupts at once), but a signal always wakes the
    loop."""
    with (
        asyncio.Runner(loop_factory=loop_factory) as runner,
        woken_by_signals(runner.get_loop()),
    ):
        return runner.run(coroutine)
