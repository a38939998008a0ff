"""A free port on 127.0.0.1 for a server that takes a port number, picked where no other
process is handed it in the seconds before the server binds it.

The kernel hands out ports for bind(0) and for every outgoing connection from its ephemeral
range (Linux: /proc/sys/net/ipv4/ip_local_port_range, 32768-60999 by default). A port picked
there, closed, and bound by the server only once it has started (vLLM binds after seconds of
imports) can be handed to any other bind(0) on the host in between: the server then fails to
bind, and the readiness check is answered by whoever took the port (seen on a busy 2-core host:
a loopback proxy got vLLM's port). Below the ephemeral range only a process asking for that very
port can take it, so the pick is a random free port there, as Google's portpicker's last resort
does; where the range cannot be read (not Linux), the kernel's own pick.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
# Where the random pick is made, below the ephemeral range: clear of the well-known and most
# registered service ports and of other tools' usual picks (8000-9999).
PICK_LOW, PICK_HIGH = 20000, 30000
TRIES = 50


def ephemeral_low(range_file: Path = EPHEMERAL_RANGE) -> int | None:
    """The lowest port of the kernel's ephemeral range, or None where it cannot be read."""
    try:
        return int(range_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def is_free(port: int) -> bool:
    """Nothing on this host is bound to `port` on 127.0.0.1 now (nor listening on all
    addresses): a plain bind succeeds."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def kernel_pick() -> int:
    """A port the kernel picks from its ephemeral range (bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def free_port(range_file: Path = EPHEMERAL_RANGE) -> int:
    """A port free on 127.0.0.1 now, below the ephemeral range where it can be (see above)."""
    low = ephemeral_low(range_file)
    high = PICK_LOW if low is None else min(PICK_HIGH, low)  # no range read: no room below it
    if high - PICK_LOW >= TRIES:
        for _ in range(TRIES):
            port = random.randrange(PICK_LOW, high)
            if is_free(port):
                return port
    return kernel_pick()
