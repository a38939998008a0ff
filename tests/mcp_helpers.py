"""What the MCP tests read from tool answers: texts, one-sentence errors, progress, processes."""

from __future__ import annotations

import os
from typing import Any

from mcp.types import CallToolResult


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def error_line(result: CallToolResult) -> str:
    """The one sentence of a tool error: no traceback, no second line."""
    assert result.is_error, result
    text = text_of(result)
    assert "\n" not in text and "Traceback" not in text, text
    return text


class Progress:
    """Every progress notification of one call."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total, message))


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content


def alive(pid: int) -> bool:
    """True while process `pid` runs (a zombie, waiting to be reaped, does not)."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False
