"""Just enough HTTP/1.1 request parsing for the calibration server: one job, no dependencies.

Clients under test send small JSON requests with content-length on kept-alive connections; the
server needs the method, the path, the body, whether to close, the `Authorization` header (to
refuse a client that does not send its key) and the `Host` header (to refuse a browser page that
rebound its name to 127.0.0.1, `sagemeter.loopback`), nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_HEAD = 64 * 1024
MAX_BODY = 8 * 1024 * 1024


class BadRequest(Exception):
    """The bytes are not a request this server can answer; the connection is closed after."""


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: bytes
    close: bool
    authorization: bytes = b""
    host: bytes | None = None


def parse_request(buffer: bytearray) -> Request | None:
    """Take one whole request off the front of `buffer`; None while it is still incomplete."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        if len(buffer) > MAX_HEAD:
            raise BadRequest("request head too large")
        return None
    lines = bytes(buffer[:end]).split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise BadRequest("malformed request line")
    length = 0
    close = parts[2] == b"HTTP/1.0"
    authorization = b""
    host = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                raise BadRequest("bad content-length") from None
            if not 0 <= length <= MAX_BODY:
                raise BadRequest("content-length out of range")
        elif name == b"transfer-encoding":
            raise BadRequest("chunked request bodies are not supported; send content-length")
        elif name == b"connection":
            token = value.strip().lower()
            close = token == b"close" or (close and token != b"keep-alive")
        elif name == b"authorization":
            authorization = value.strip()
        elif name == b"host":
            host = value.strip()
    start = end + 4
    if len(buffer) < start + length:
        return None
    body = bytes(buffer[start : start + length])
    del buffer[: start + length]
    path = parts[1].split(b"?", 1)[0].decode("latin-1")
    return Request(parts[0].decode("latin-1"), path, body, close, authorization, host)
