"""The port sagemeter picks for a server that takes a port number (vLLM, `cmd:` commands): free,
and below the kernel's ephemeral range where that range can be read, so no other process's
bind(0) or outgoing connection is handed it before the server binds it."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from sagemeter.engines.ports import EPHEMERAL_RANGE, PICK_LOW, ephemeral_low, free_port, is_free


@pytest.mark.skipif(ephemeral_low() is None, reason="Linux: the ephemeral range is in /proc")
def test_the_pick_is_free_and_below_the_kernels_ephemeral_range() -> None:
    low = ephemeral_low()
    assert low is not None and low == int(EPHEMERAL_RANGE.read_text().split()[0])
    picks = [free_port() for _ in range(20)]
    assert all(PICK_LOW <= port < low for port in picks), picks
    assert len(set(picks)) > 1, picks  # random: two servers started together rarely collide
    for port in picks:
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))  # free: the server it is for can bind it


def test_a_port_in_use_is_not_free_and_without_room_below_the_range_the_kernel_picks(
    tmp_path: Path,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert not is_free(port)
    # Where no range can be read (not Linux), or it leaves no room below it, the kernel picks.
    missing = tmp_path / "no-such-file"
    wide = tmp_path / "ip_local_port_range"
    wide.write_text("1024\t65535\n")
    for range_file in (missing, wide):
        port = free_port(range_file)
        assert 1024 <= port <= 65535 and is_free(port)
    low = ephemeral_low()
    if low is not None:  # Linux: the kernel's own pick comes from its range, never below it
        assert free_port(wide) >= low
