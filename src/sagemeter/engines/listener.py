"""Whether the program answering on a server's port is another one that held the port first.

sagemeter picks a free port (`ports.free_port`) and hands it to the server it starts, which binds
it seconds to minutes later (vLLM after about 40 s of imports). A program that binds the port in
between answers in the server's place: its /health and /v1/models would pass for the server's
and its replies would be measured as the checkpoint's. So once the port answers, the programs
listening where 127.0.0.1:PORT reaches (127.0.0.1 or every address) are looked up: one that is
neither the process sagemeter started nor one of its descendants, and that was already running
when that process started, is another program. The rule holds for a server that listens from
its own processes (vLLM); a `cmd:` command may hand its port to a program that ran before it
(rootless Docker's port forwarder), so commands are held only to the port being free when they
start (`launched.LaunchedServer.listens_itself`).

Where listening sockets cannot be read (macOS without root) or their owner is hidden (another
user's process on Linux), nothing is known and nothing is refused.
"""

from __future__ import annotations

import socket

import psutil

# The listening addresses a connection to 127.0.0.1 reaches (IPv4, and IPv6 sockets that take
# IPv4 too); a program listening only on ::1 or a LAN address does not answer the server's port.
REACHED_FROM_LOOPBACK = frozenset(
    {"127.0.0.1", "0.0.0.0", "::", "::ffff:127.0.0.1", "::ffff:0.0.0.0"}
)


def _listeners(port: int) -> list[int]:
    """The process ids listening on TCP `port` where 127.0.0.1 reaches, as far as they can be
    read."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):  # AccessDenied on macOS without root
        return []
    return [
        connection.pid
        for connection in connections
        if connection.status == psutil.CONN_LISTEN
        and connection.laddr
        and connection.laddr.port == port
        and connection.laddr.ip in REACHED_FROM_LOOPBACK
        and connection.pid is not None
    ]


def accepts_connections(port: int) -> bool:
    """Something on this host accepts a connection to 127.0.0.1:`port` now (a port whose last
    server has just ended, its connections in TIME_WAIT, does not, though a plain bind would
    fail there)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2.0):
            return True
    except OSError:
        return False


def _described(process_id: int) -> str | None:
    """'pid N (NAME)', or None once it has ended or is not ours to read."""
    try:
        return f"pid {process_id} ({psutil.Process(process_id).name()})"
    except psutil.Error:
        return None


def holder(port: int) -> str | None:
    """'pid N (NAME)' of a program listening on `port` where 127.0.0.1 reaches, where it can be
    read."""
    for process_id in _listeners(port):
        described = _described(process_id)
        if described is not None:
            return described
    return None


def other_listener(port: int, started_pid: int) -> str | None:
    """'pid N (NAME)' of a program listening on `port` that is neither `started_pid` nor below
    it and was running before it; None when there is none or it cannot be told (the started
    process has ended: its exit is what the caller reports)."""
    try:
        started = psutil.Process(started_pid)
        # Start times on one clock (on Linux, boot time plus clock ticks: compared with each
        # other they are exact to a tick, where against time.time() they are a second off).
        began = started.create_time()
        ours = {started_pid} | {child.pid for child in started.children(recursive=True)}
    except psutil.Error:
        return None
    for process_id in _listeners(port):
        if process_id in ours:
            continue
        try:
            created = psutil.Process(process_id).create_time()
        except psutil.Error:  # ended meanwhile, or not ours to read
            continue
        if created < began:
            return _described(process_id)
    return None
