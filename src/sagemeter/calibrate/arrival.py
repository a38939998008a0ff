"""When a request's bytes reached the server's socket, by the kernel's stamp rather than ours.

When 128 requests land at one instant, the server reads and parses them one after another; a
clock read at parse time would start the last request's 50 ms up to a millisecond after the
client sent it, and the truth would drift by exactly the burst the client is being tested on.
Linux stamps each received packet (SO_TIMESTAMPNS) and hands the stamp over with the bytes, so
every deadline counts from the moment the request arrived. Elsewhere, and on architectures
whose option numbers differ, or where the kernel takes the option but stamps at read time
(some sandboxed kernels), the server falls back to its own clock at read time and GET /stats
says which it used: a probe at start-up checks that a stamp is older than the read.
"""

from __future__ import annotations

import platform
import socket
import struct
import sys
import time
from functools import cache

# SO_TIMESTAMPNS (its "old", 64-bit-time_t form) in the generic Linux socket numbers, which
# x86-64 and ARM64 use; Python's socket module does not export it.
_LINUX_SO_TIMESTAMPNS = 35
_GENERIC_MACHINES = frozenset({"x86_64", "amd64", "aarch64", "arm64"})
_TIMESPEC = struct.Struct("@qq")  # seconds, nanoseconds (a 64-bit time_t)


def _option() -> int | None:
    if sys.platform != "linux" or platform.machine().lower() not in _GENERIC_MACHINES:
        return None
    return _LINUX_SO_TIMESTAMPNS


SO_TIMESTAMPNS = _option()
ANCILLARY_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) if SO_TIMESTAMPNS is not None else 0


# The probe leaves its bytes unread this long; a stamp that tells arrival from read must show
# at least half of it.
_PROBE_WAIT_S = 0.02


def enable_stamps(sock: socket.socket) -> bool:
    """Ask the kernel to stamp what `sock` receives; False where it cannot or its stamps are
    not arrival times (then the read time stands in)."""
    return kernel_stamps_arrival() and _set_option(sock)


def _set_option(sock: socket.socket) -> bool:
    if SO_TIMESTAMPNS is None:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


# A stamp 10 ms old proves arrival stamps; a young one may only mean the host delivered the probe
# late (a busy machine), so the probe is tried a few times before it says "read time".
_PROBE_TRIES = 3


@cache
def kernel_stamps_arrival() -> bool:
    """Whether this kernel's stamp says when bytes arrived: bytes left unread for 20 ms must
    come with a stamp at least 10 ms old, in one of a few tries. Probed once per process, on a
    loopback pair of its own."""
    if SO_TIMESTAMPNS is None:
        return False
    _keep_stamping_on()
    return any(_stamp_is_old() for _ in range(_PROBE_TRIES))


_KEEPER: list[socket.socket] = []


def _keep_stamping_on() -> None:
    """Hold one stamping socket open for the life of the process.

    Linux stamps packets on arrival only while some socket on the host asks for stamps, and it
    turns that on and off in deferred work: when the last stamping socket closes, the next
    one's first packet can arrive before the switch is back on and be stamped when it is read.
    A request timed from its read would look early by however long it waited, so one socket
    keeps the switch on from the probe until the process ends.
    """
    if _KEEPER:
        return
    keeper = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if _set_option(keeper):
        _KEEPER.append(keeper)
    else:
        keeper.close()


def _stamp_is_old() -> bool:
    """One try: send a few bytes, leave them unread 20 ms, read them with their stamp."""
    try:
        with (
            socket.create_server(("127.0.0.1", 0)) as listener,
            socket.create_connection(listener.getsockname(), timeout=1.0) as sender,
        ):
            receiver, _ = listener.accept()
            with receiver:
                if not _set_option(receiver):
                    return False
                receiver.settimeout(1.0)
                sender.sendall(b"probe")
                time.sleep(_PROBE_WAIT_S)
                _data, arrived = receive(receiver, 16, True)
    except OSError:
        return False
    return time.monotonic() - arrived >= _PROBE_WAIT_S / 2


def receive(sock: socket.socket, size: int, stamped: bool) -> tuple[bytes, float]:
    """Read up to `size` bytes and the monotonic instant they arrived (now, without a stamp).

    The kernel's stamp is on the wall clock; it becomes monotonic by how long ago it was,
    read on both clocks at once, so a wall clock stepped since start-up does not move it.
    """
    if not stamped:
        return sock.recv(size), time.monotonic()
    data, ancillary, _flags, _address = sock.recvmsg(size, ANCILLARY_SIZE)
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= 16:
            seconds, nanoseconds = _TIMESPEC.unpack_from(payload)
            ago = time.time() - (seconds + nanoseconds * 1e-9)
            return data, time.monotonic() - max(ago, 0.0)
    return data, time.monotonic()
