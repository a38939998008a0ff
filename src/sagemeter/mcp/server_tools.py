"""The tools a server is built with, each one's SDK description made once per process.

The SDK's `Tool.from_function` reads a tool function's signature and builds a pydantic model and
JSON schemas for its arguments and its answer: about 11 ms a tool on a slow 2-core host, 0.18 s
for sagemeter's 16. The tools are closures over one server's config, so every `build_server`
paid it again (a program serving several results folders, and the tests, build many). A tool
whose name, signature, docstring and registration match one described before is that
description again, holding its own function.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server.mcpserver.tools import Tool
from mcp.types import Icon, ToolAnnotations

F = TypeVar("F", bound=Callable[..., Any])

# Descriptions made so far, by everything the SDK reads to make one (a signature's text holds
# its annotations and defaults, so a default that differs makes a description of its own).
_described: dict[tuple[str, ...], Tool] = {}


class ServerTools:
    """What the register_* functions add tools to, as they would to the SDK's server
    (`@server.tool(title=..., annotations=...)`); `build_server` hands `tools` to the server."""

    def __init__(self) -> None:
        self.tools: list[Tool] = []

    def tool(
        self,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        icons: list[Icon] | None = None,
        meta: dict[str, Any] | None = None,
        structured_output: bool | None = None,
    ) -> Callable[[F], F]:
        def register(fn: F) -> F:
            registration = {
                "name": name,
                "title": title,
                "description": description,
                "annotations": annotations,
                "icons": icons,
                "meta": meta,
                "structured_output": structured_output,
            }
            self.tools.append(described(fn, registration))
            return fn

        return register


def described(fn: Callable[..., Any], registration: dict[str, Any]) -> Tool:
    """The SDK's description of tool `fn` registered with `registration`."""
    key = (
        registration["name"] or fn.__name__,
        str(inspect.signature(fn)),
        fn.__doc__ or "",
        repr(sorted(registration.items())),
    )
    made = _described.get(key)
    if made is None:
        made = _described[key] = Tool.from_function(fn, **registration)
    return made.model_copy(update={"fn": fn})
