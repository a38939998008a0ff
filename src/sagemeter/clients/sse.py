"""Server-sent events, read line by line as they arrive (the SSE subset LLM servers use)."""

from __future__ import annotations

from collections.abc import AsyncIterator


async def iter_sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """Yield the `data` of each event as soon as its terminating blank line (or end) arrives.

    Multi-line data fields are joined with newlines; comments (`:`) and other fields are ignored.
    """
    data: list[str] = []
    async for line in lines:
        if line == "":
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value.removeprefix(" "))
    if data:
        yield "\n".join(data)
