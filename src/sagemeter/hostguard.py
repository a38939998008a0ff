"""A loopback TCP port in front of a server that cannot check `Host` itself (llama.cpp's).

llama.cpp's server answers any `Host`, so a browser page that rebinds its name to 127.0.0.1
could use the embedded engine. The engine listens on a Unix socket in a private folder instead
(no page can reach that), and this guard is its only TCP door: it reads a connection's first
request head, answers 421 when its `Host` is not a loopback name (`loopback`), and otherwise
passes the bytes both ways untouched. A browser keeps one connection per origin, so every
request on a connection carries the `Host` of its first; after that check the guard only
copies bytes (its cost measured: README, "Local servers answer only their own machine's names").
"""

from __future__ import annotations

import contextlib
import socket
import threading

from sagemeter.loopback import is_loopback_host, refusal_response

MAX_HEAD = 64 * 1024
CHUNK = 64 * 1024


def _host_of(head: bytes) -> bytes | None:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"host":
            return value.strip()
    return None


def _copy(source: socket.socket, sink: socket.socket) -> None:
    """Bytes from `source` to `sink` until `source` ends (then `sink` is told, as a half
    close) or either fails (then both are shut)."""
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    try:
        while count := source.recv_into(buffer):
            sink.sendall(view[:count])
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        for end in (sink, source):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


class HostGuard:
    """Listen on 127.0.0.1:`port` (0: any free port) and pass checked connections to the Unix
    socket `upstream`; `close` stops taking new ones."""

    def __init__(self, upstream: str, port: int = 0) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", port), backlog=512)
        self.port = self._listener.getsockname()[1]
        self.refused = 0  # connections answered 421
        self._thread = threading.Thread(target=self._accept, name="host-guard", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = bytearray()
        with client:
            try:
                while b"\r\n\r\n" not in head and len(head) <= MAX_HEAD:
                    piece = client.recv(CHUNK)
                    if not piece:
                        return
                    head += piece
            except OSError:
                return
            end = head.find(b"\r\n\r\n")
            if end < 0:
                return  # a head longer than any real request's: closed unanswered
            if not is_loopback_host(_host_of(bytes(head[:end]))):
                self.refused += 1
                with contextlib.suppress(OSError):
                    client.sendall(refusal_response())
                return
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
                try:
                    server.connect(self.upstream)
                    server.sendall(head)
                except OSError:
                    return
                back = threading.Thread(target=_copy, args=(server, client), daemon=True)
                back.start()
                _copy(client, server)
                back.join()
