"""An OpenAI-compatible server that answers at once, with keep-alive: the client's floor.

Run as `python -m benchmarks.instant_server PORT_FILE`; it writes its port to PORT_FILE and serves
on 127.0.0.1 until killed. Replies: a plain completion, or a stream of `tokens` chunks (from the
request's max_tokens) sent in one write and built once per length, so nearly all the time
measured is the client's own.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
from pathlib import Path


@functools.lru_cache(maxsize=64)
def _plain(max_tokens: int) -> bytes:
    body = json.dumps(
        {
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "x" * max_tokens},
                    "finish_reason": "length",
                }
            ],
            "usage": {"completion_tokens": max_tokens, "prompt_tokens": 1},
        }
    ).encode()
    head = (
        f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


@functools.lru_cache(maxsize=64)
def _stream(max_tokens: int) -> bytes:
    events = [
        "data: "
        + json.dumps({"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]})
        + "\n\n"
        for _ in range(max_tokens)
    ]
    events.append(
        "data: "
        + json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
        + "\n\n"
    )
    events.append(
        "data: " + json.dumps({"choices": [], "usage": {"completion_tokens": max_tokens}}) + "\n\n"
    )
    events.append("data: [DONE]\n\n")
    body = "".join(events).encode()
    head = (
        f"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            request = json.loads(await reader.readexactly(length)) if length else {}
            if head.startswith(b"GET"):
                body = b'{"data": [{"id": "instant"}]}'
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                    + str(len(body)).encode()
                    + b"\r\n\r\n"
                    + body
                )
            else:
                max_tokens = int(request.get("max_tokens", 1))
                writer.write(_stream(max_tokens) if request.get("stream") else _plain(max_tokens))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port_file: Path) -> None:
    server = await asyncio.start_server(_serve, "127.0.0.1", 0)
    port_file.write_text(str(server.sockets[0].getsockname()[1]))
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
