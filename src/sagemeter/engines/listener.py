"""Whether the program answering on a server's port is another one that held the port first.

sagemeter picks a free port (`ports.free_port`) and hands it to the server it starts, which binds
it seconds to minutes later (vLLM after about 40 s of imports). A program that binds the port in
between answers in the server's place: its /health and /v1/models would pass for the server's
and its replies would be measured as the checkpoint's. So once the port answers, the program
listening on it is looked up: one that is neither the process sagemeter started nor one of its
descendants, and that was already running when the server was started, is another program's
(a server started by a `cmd:` command may legitimately listen from a process that is not a
descendant, e.g. Docker's port proxy, but that process comes after the command).

Where listening sockets cannot be read (macOS without root) or their owner is hidden (another
user's process on Linux), nothing is known and nothing is refused.
"""

from __future__ import annotations

import psutil


def _listeners(port: int) -> list[int]:
    """The process ids listening on TCP `port` on any address, as far as they can be read."""
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
        and connection.pid is not None
    ]


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
            process = psutil.Process(process_id)
            created, name = process.create_time(), process.name()
        except psutil.Error:  # ended meanwhile, or not ours to read
            continue
        if created < began:
            return f"pid {process_id} ({name})"
    return None
