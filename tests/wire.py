"""A loopback HTTP server that misbehaves on purpose, one behaviour per request path.

Raw asyncio streams (not a framework) so a test can break a response anywhere: mid-stream,
mid-event, or by never answering. It runs on its own thread and loop, bound to 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress

Handler = Callable[[asyncio.StreamWriter, dict[str, object]], Awaitable[None]]


def sse(payload: object) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


def chunk(content: str | None = None, finish: str | None = None) -> dict[str, object]:
    delta = {"content": content} if content is not None else {}
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"connection: close\r\n\r\n"
)


def json_response(status: int, payload: object) -> bytes:
    body = json.dumps(payload).encode()
    reason = {200: "OK", 500: "Internal Server Error", 503: "Service Unavailable"}.get(status, "X")
    return (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body


class WireServer:
    """Start with `with WireServer(handlers) as server:`; `server.url` ends in /v1."""

    def __init__(self, routes: dict[str, Handler]) -> None:
        self.routes = routes
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.requests: list[dict[str, object]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> WireServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())
        self.loop.close()

    async def _main(self) -> None:
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stopping.wait()
        server.close()
        current = asyncio.current_task()
        handlers = [task for task in asyncio.all_tasks() if task is not current]
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            _method, path, _ = lines[0].split(" ", 2)
            headers = {
                k.lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)
            }
            length = int(headers.get("content-length", "0"))
            body = json.loads(await reader.readexactly(length)) if length else {}
            self.requests.append({"path": path, **body})
            handler = self.routes.get(path)
            if handler is None:
                writer.write(json_response(404, {"error": "no route"}))
            else:
                await handler(writer, {**body, "_headers": headers})
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


@contextmanager
def fixed_answer_server(answer: bytes) -> Iterator[str]:
    """A loopback server answering every connection with the same bytes, then closing it
    (headers only, garbage, HTML: whatever a test needs a server to send); yields HOST:PORT."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                if stop.is_set():
                    return  # the wake-up connection of the close below
                conn.settimeout(2)
                try:
                    conn.recv(65536)
                    conn.sendall(answer)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    address = listener.getsockname()
    try:
        yield f"127.0.0.1:{address[1]}"
    finally:
        # Wake the blocked accept with one connection rather than poll it: the close is at once.
        stop.set()
        with suppress(OSError), socket.create_connection(address, timeout=2):
            pass
        thread.join(timeout=2)
        listener.close()
