"""The server itself: every tool registered on the SDK's MCPServer, and how it is run."""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import ValidationError

from sagemeter import __version__
from sagemeter.errors import UserError
from sagemeter.loopback import ALLOWED_HOST_PATTERNS, ALLOWED_ORIGIN_PATTERNS
from sagemeter.mcp.config import LOGS_FLAG, WRITE_FLAG, ServerConfig
from sagemeter.mcp.engines import LocalEngines
from sagemeter.mcp.experiment_tools import register_experiment_tools
from sagemeter.mcp.guard import failure
from sagemeter.mcp.inspect_tools import register_inspect_tools
from sagemeter.mcp.local_tools import register_local_tools
from sagemeter.mcp.measure_tools import register_measure_tools
from sagemeter.mcp.sagemaker_read import register_sagemaker_reads
from sagemeter.mcp.sagemaker_write import register_sagemaker_writes
from sagemeter.mcp.server_tools import ServerTools
from sagemeter.mcp.slo_tools import register_slo_tools
from sagemeter.signal_wakeup import woken_by_signals

LOCALHOST = "127.0.0.1"


def instructions(config: ServerConfig) -> str:
    """What the assistant is told about this server when it connects."""
    write = "allowed" if config.allow_write else f"refused (the user starts it with {WRITE_FLAG})"
    logs = "allowed" if config.allow_logs else f"refused (the user starts it with {LOGS_FLAG})"
    return (
        "sagemeter answers: which checkpoint, on which machine, at what price? The loop: "
        "check_quota and get_price pick a region; deploy_endpoint (waits for InService); "
        "measure_endpoint each checkpoint the same way, one after the other on the same "
        "instance type (A-B-A when you can); compare_results; delete_endpoint every endpoint "
        "so nothing keeps billing; list_endpoints shows what still runs and what it costs. "
        "Without a cloud account, list_checkpoints, start_local/stop_local and "
        "measure_endpoint target=local:CHECKPOINT run the embedded engine on this machine. "
        "inspect_checkpoint reads a checkpoint's header (no deployment) and predicts its decode "
        "speed from the bytes a token reads. run_experiment runs a whole plan (deploy, measure, "
        "delete each arm in A-B-A order, compare, report) with a journal: resumable, and it "
        "deletes what it created on a stop, a failure or its spend cap. "
        f"Deploying and deleting: {write}. Reading container logs: {logs}. "
        "Ask the user before deploy_endpoint (it bills per hour) and before delete_endpoint "
        "(confirm must be the endpoint's name). Result files are written to "
        f"{config.results_dir}."
    )


class SagemeterServer(MCPServer[Any]):
    """MCPServer whose argument errors are one sentence naming the parameter, like every error."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            first = exc.__cause__.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "arguments"
            message = str(first["msg"]).removeprefix("Value error, ")  # a rule's own sentence
            return failure(f"{name}: {where}: {message} (see the tool's input schema)")


def build_server(
    config: ServerConfig | None = None, engines: LocalEngines | None = None
) -> MCPServer[Any]:
    """The MCP server with every sagemeter tool; engines it starts stop with its lifespan."""
    config = config or ServerConfig()
    engines = engines or LocalEngines(config.results_dir)

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
        try:
            yield {}
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(engines.stop_all)

    tools = ServerTools()
    register_sagemaker_reads(tools, config)
    register_sagemaker_writes(tools, config)
    register_local_tools(tools, engines, config)
    register_measure_tools(tools, config)
    register_inspect_tools(tools, config)
    register_experiment_tools(tools, config)
    register_slo_tools(tools, config)
    return SagemeterServer(
        "sagemeter",
        title="sagemeter",
        description="Deploy, measure, compare and tear down LLM checkpoints.",
        instructions=instructions(config),
        version=__version__,
        lifespan=lifespan,
        log_level="WARNING",
        tools=tools.tools,
    )


def check_port(port: int) -> None:
    """One line, before anything starts, when 127.0.0.1:`port` cannot be bound (uvicorn would
    log a traceback-like error and exit); bound as uvicorn binds it, with SO_REUSEADDR, so a
    port left in TIME_WAIT by an earlier server is not taken for busy."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((LOCALHOST, port))
        except OSError as exc:
            reason = exc.strerror or str(exc)
            if exc.errno == errno.EADDRINUSE:
                raise UserError(
                    f"port {port} on {LOCALHOST} is in use: {reason}; stop what holds it or give "
                    "another --http PORT"
                ) from None
            raise UserError(
                f"port {port} on {LOCALHOST} cannot be served: {reason}; give another --http PORT"
            ) from None


def loopback_only() -> TransportSecuritySettings:
    """The SDK's DNS-rebinding check, set from sagemeter's one loopback rule (`loopback`)
    rather than left to the SDK's default: a Host or Origin not naming 127.0.0.1, localhost or
    [::1] is refused (421, 403)."""
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(ALLOWED_HOST_PATTERNS),
        allowed_origins=list(ALLOWED_ORIGIN_PATTERNS),
    )


async def _woken_by_signals(run: Callable[[], Awaitable[None]]) -> None:
    """`run()` on a loop that Ctrl-C always wakes (sagemeter.signal_wakeup): anyio.run, like
    asyncio.run, could leave it pending while the server waited idle for its client."""
    with woken_by_signals(asyncio.get_running_loop()):
        await run()


def serve(config: ServerConfig, http_port: int | None = None) -> None:
    """Run until the client goes away: stdio, or streamable HTTP on 127.0.0.1:PORT/mcp."""
    if http_port is not None:
        check_port(http_port)
    engines = LocalEngines(config.results_dir)
    server = build_server(config, engines)
    try:
        if http_port is None:
            anyio.run(_woken_by_signals, server.run_stdio_async)
        else:
            anyio.run(
                _woken_by_signals,
                lambda: server.run_streamable_http_async(
                    host=LOCALHOST, port=http_port, transport_security=loopback_only()
                ),
            )
    finally:
        engines.stop_all()
