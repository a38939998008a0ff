"""What every tool's answer passes through: permissions, redaction, one-sentence errors.

A tool returns `reply(text, model)`: structured content (the model) plus a short text. A failure
the user can act on (`UserError`, any AWS error) becomes a tool error whose text is that one
sentence. Every string that leaves, text or structured, goes through the SageMaker `redact`, so
tokens and keys never reach the assistant.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import ParamSpec

from botocore.exceptions import BotoCoreError, ClientError
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from sagemeter.errors import ManyProblems, UserError
from sagemeter.mcp.config import LOGS_FLAG, WRITE_FLAG, ServerConfig
from sagemeter.redaction import redact, redact_tree
from sagemeter.sagemaker.aws import explain, one_line

P = ParamSpec("P")
LOG = logging.getLogger("sagemeter.mcp")
ERROR_LIMIT = 600


def reply(text: str, model: BaseModel) -> CallToolResult:
    """A tool's answer: `model` as structured content, `text` for people to read."""
    return CallToolResult(
        content=[TextContent(type="text", text=redact(text))],
        structured_content=redact_tree(model.model_dump(mode="json")),
    )


def failure(message: str) -> CallToolResult:
    """A tool error carrying one actionable sentence, never a traceback."""
    return CallToolResult(
        content=[TextContent(type="text", text=one_line(message, ERROR_LIMIT))], is_error=True
    )


def guarded(
    tool: Callable[P, Awaitable[CallToolResult]],
) -> Callable[P, Awaitable[CallToolResult]]:
    """Turn the errors a person can act on into tool errors, and anything else (a bug) into
    one sentence too, its traceback logged on the server's stderr, never in the answer."""

    @functools.wraps(tool)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            return await tool(*args, **kwargs)
        except Exception as exc:
            message = actionable(exc)
            if message is None:
                LOG.exception("%s failed unexpectedly", getattr(tool, "__name__", "a tool"))
                message = (
                    f"unexpected {type(exc).__name__} (a sagemeter bug; its traceback is in "
                    "the server's log): please report it"
                )
            return failure(message)

    return wrapper


def actionable(exc: BaseException) -> str | None:
    """The sentence for a failure a person can act on, also when a task group wrapped it."""
    if isinstance(exc, ManyProblems):
        return exc.sentence()  # an answer is one sentence: the problems joined by "; "
    if isinstance(exc, UserError):
        return str(exc)
    if isinstance(exc, (ClientError, BotoCoreError)):
        return str(explain(exc, "complete the request"))
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            message = actionable(inner)
            if message is not None:
                return message
    return None


def require_write(config: ServerConfig, tool: str, what: str) -> None:
    """Refuse a tool that changes the AWS account unless the server was started to allow it."""
    if not config.allow_write:
        raise UserError(
            f"{tool} {what}, and this server was started without {WRITE_FLAG}: ask the user to "
            f"restart it as `sagemeter mcp {WRITE_FLAG}` to allow deploying and deleting"
        )


def require_logs(config: ServerConfig, tool: str) -> None:
    """Refuse to read container logs (they may hold prompts or data) unless allowed."""
    if not config.allow_logs:
        raise UserError(
            f"{tool} reads the endpoint's container log, and this server was started without "
            f"{LOGS_FLAG}: ask the user to restart it as `sagemeter mcp {LOGS_FLAG}` to allow it"
        )
