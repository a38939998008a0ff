"""One client connection on a raw non-blocking socket: the cheapest write Python can make.

Almost all the server's CPU goes into writing small chunks. A direct `socket.send` from the
timer callback skips the transport layer's bookkeeping per write (measured: about a quarter of
the server's CPU at 128 streams); the loop is used only to learn when a socket is readable, or
writable again in the rare case a client's receive buffer fills up.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

from sagemeter.calibrate import arrival, wire
from sagemeter.calibrate.http1 import BadRequest, Request, parse_request
from sagemeter.loopback import is_loopback_host, refusal_response

READ_SIZE = 65536
CLOSE_HEADER = b"connection: close\r\n"
CLOSE_MODES = ("", "always", "after-reply", "on-reuse")


class ClosePolicy:
    """How the server ends kept-alive connections, shared by all of them, with what it cost.

    "" keeps them alive. "always" sends `Connection: close` and closes after each reply.
    "after-reply" closes after each reply without saying so (the client learns from the end of
    file, often only when it sends again). "on-reuse" answers the first request of a connection
    and closes the connection, unanswered, when a second request arrives on it: what a client
    sees when a server closed an idle connection just before the client reused it.
    `lost` counts the requests closed unanswered that way.
    """

    __slots__ = ("lost", "mode")

    def __init__(self, mode: str = "") -> None:
        if mode not in CLOSE_MODES:
            raise ValueError(f"connection_close must be one of {CLOSE_MODES}")
        self.mode = mode
        self.lost = 0


class RequestError(Exception):
    """A request the server understood but refuses: a 4xx answer, the connection stays open."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# Answers at once (bytes), or schedules a timed reply on the connection and returns None.
Responder = Callable[[Request, "Connection"], bytes | None]


class Connection:
    """Requests answered in order, one timed reply at a time, kept alive unless asked not to."""

    __slots__ = (
        "arrived",
        "buffer",
        "busy",
        "close_after",
        "closed",
        "fd",
        "loop",
        "policy",
        "replies",
        "respond",
        "sock",
        "stamped",
        "unsent",
    )

    def __init__(
        self,
        sock: socket.socket,
        loop: asyncio.AbstractEventLoop,
        respond: Responder,
        stamped: bool = False,
        policy: ClosePolicy | None = None,
    ):
        self.sock = sock
        self.policy = policy or ClosePolicy()
        self.replies = 0
        self.stamped = stamped
        # When the request being answered arrived (monotonic): the kernel's stamp of its
        # bytes, or, for a pipelined request, the moment the one before it was finished.
        self.arrived = time.monotonic()
        self.fd = sock.fileno()
        self.loop = loop
        self.respond = respond
        self.buffer = bytearray()
        self.unsent = bytearray()
        self.busy = False
        self.closed = False
        self.close_after = False
        loop.add_reader(self.fd, self._readable)

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        if self.policy.mode == "always" and data[:9] == b"HTTP/1.1 " and CLOSE_HEADER not in data:
            line_end = data.index(b"\r\n") + 2
            data = data[:line_end] + CLOSE_HEADER + data[line_end:]
        if self.unsent:
            self.unsent += data
            return
        try:
            sent = self.sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.close()
            return
        if sent < len(data):
            self.unsent += data[sent:]
            self.loop.add_writer(self.fd, self._writable)

    def finished(self) -> None:
        """The timed reply is out: close if asked, else answer a pipelined request next."""
        self.busy = False
        self.arrived = time.monotonic()
        self.replies += 1
        if self.policy.mode in ("always", "after-reply"):
            self.close_after = True
        if self.close_after:
            self._close_when_sent()
        elif self.buffer:
            # Not from inside the scheduler's flush: answering may schedule a new reply.
            self.loop.call_soon(self._answer_waiting)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.loop.remove_reader(self.fd)
        self.loop.remove_writer(self.fd)
        self.sock.close()

    def _readable(self) -> None:
        try:
            data, self.arrived = arrival.receive(self.sock, READ_SIZE, self.stamped)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.close()
            return
        self.buffer += data
        if not self.busy:
            self._answer_waiting()

    def _writable(self) -> None:
        try:
            sent = self.sock.send(self.unsent)
        except BlockingIOError:
            return
        except OSError:
            self.close()
            return
        del self.unsent[:sent]
        if not self.unsent:
            self.loop.remove_writer(self.fd)
            if self.close_after and not self.busy:
                self.close()

    def _close_when_sent(self) -> None:
        if not self.unsent:
            self.close()

    def _answer_waiting(self) -> None:
        while not self.busy and not self.closed and not self.close_after:
            try:
                request = parse_request(self.buffer)
            except BadRequest as exc:
                self.close_after = True
                self.write(wire.error_response(400, str(exc), close=True))
                self._close_when_sent()
                return
            if request is None:
                return
            if not is_loopback_host(request.host):
                self.close_after = True
                self.write(refusal_response())
                self._close_when_sent()
                return
            if self.policy.mode == "on-reuse" and self.replies > 0:
                self.policy.lost += 1
                self.close()  # unread bytes left: the kernel resets the connection
                return
            self.close_after = request.close or self.policy.mode in ("always", "after-reply")
            try:
                answer = self.respond(request, self)
            except RequestError as exc:
                answer = wire.error_response(exc.status, str(exc), close=request.close)
            if answer is None:
                self.busy = True
                return
            self.write(answer)
            self.replies += 1
            if self.close_after:
                self._close_when_sent()


class Listener:
    """Accepts connections on 127.0.0.1 and hands each to a `Connection`."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        port: int,
        respond: Responder,
        policy: ClosePolicy | None = None,
    ) -> None:
        self.loop = loop
        self.respond = respond
        self.policy = policy or ClosePolicy()
        self.accepted = 0
        self.kernel_stamps: bool | None = None  # known once a connection is accepted
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(4096)
        self.sock.setblocking(False)
        self.port: int = self.sock.getsockname()[1]
        # The kernel's stamps are probed (20 ms, once a process) before the port is announced,
        # not while the first request waits to be read.
        arrival.kernel_stamps_arrival()
        loop.add_reader(self.sock.fileno(), self._accept)

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.accepted += 1
            self.kernel_stamps = arrival.enable_stamps(sock)
            Connection(sock, self.loop, self.respond, self.kernel_stamps, self.policy)

    def close(self) -> None:
        self.loop.remove_reader(self.sock.fileno())
        self.sock.close()
