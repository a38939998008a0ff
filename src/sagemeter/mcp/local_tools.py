"""The embedded engine's tools: list its checkpoints, start one on loopback, stop it.

Starting and stopping an engine needs no --allow-write: it is a child of this server on
127.0.0.1, bills nothing, and ends with the server.
"""

from typing import Annotated, Any

import anyio.to_thread
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from sagemeter.engines.checkpoints import checkpoint_rows
from sagemeter.mcp import names
from sagemeter.mcp.config import ServerConfig
from sagemeter.mcp.engines import LocalEngines
from sagemeter.mcp.guard import guarded, reply
from sagemeter.mcp.models import CheckpointsAnswer, LocalEngineAnswer, StopAnswer
from sagemeter.mcp.server_tools import ServerTools
from sagemeter.options.faces import read_options, with_options
from sagemeter.options.serve import SERVE, ServeOptions
from sagemeter.targets import LocalTarget

LISTS = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
STARTS = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
STOPS = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)

Checkpoint = Annotated[
    str,
    Field(
        description="a name from list_checkpoints (smollm2-q4_1, smollm2-f32) or the name of a "
        ".gguf file in the server's results folder"
    ),
]


def register_local_tools(server: ServerTools, engines: LocalEngines, config: ServerConfig) -> None:
    """Add list_checkpoints, start_local and stop_local to `server`."""

    @server.tool(title="List the embedded engine's checkpoints", annotations=LISTS)
    @guarded
    async def list_checkpoints() -> Annotated[CallToolResult, CheckpointsAnswer]:
        """The embedded llama.cpp engine's checkpoints, with storage, size and bits per weight.

        Measure one with measure_endpoint target=local:NAME, or serve it with start_local.
        """
        rows = await anyio.to_thread.run_sync(checkpoint_rows)
        lines = []
        for row in rows:
            if not row.available:
                lines.append(f"{row.name}: {row.storage}, {row.note}")
                continue
            lines.append(
                f"{row.name}: {row.storage}, {row.size_mib:.1f} MiB, "
                f"{row.bits_per_weight:.2f} bits/weight, {(row.parameters or 0) / 1e6:.1f} M "
                "parameters"
            )
        return reply("\n".join(lines), CheckpointsAnswer(checkpoints=rows))

    @server.tool(title="Start the embedded engine", annotations=STARTS)
    @guarded
    @with_options(SERVE, "mcp")  # parallel: serve's options model
    async def start_local(
        checkpoint: Checkpoint = "smollm2-q4_1",
        port: Annotated[
            int, Field(ge=0, le=65535, description="port on 127.0.0.1; 0 picks a free one")
        ] = 0,
        **options: Any,
    ) -> Annotated[CallToolResult, LocalEngineAnswer]:
        """Serve a checkpoint on 127.0.0.1 (OpenAI-compatible) until stop_local or shutdown.

        Returns its URL, a target for measure_endpoint. A running checkpoint is returned as is.
        """
        (given,) = read_options(SERVE, options, "mcp")
        assert isinstance(given, ServeOptions)
        named = names.local_checkpoint(config, checkpoint)
        started = await engines.start(named, parallel=given.parallel, port=port)
        engine = started.engine
        assert engine.base_url is not None
        answer = LocalEngineAnswer(
            checkpoint=engine.checkpoint.name,
            target=engine.base_url,
            pid=engine.pid,
            log_path=str(engine.log_path),
            already_running=started.already_running,
            start_seconds=None if engine.started_s is None else round(engine.started_s, 2),
        )
        how = "already running" if started.already_running else "started"
        text = (
            f"{answer.checkpoint} {how}: serving at {answer.target} (OpenAI-compatible); measure "
            f"it with measure_endpoint target={answer.target}; stop_local ends it"
        )
        return reply(text, answer)

    @server.tool(title="Stop the embedded engine", annotations=STOPS)
    @guarded
    async def stop_local(
        checkpoint: Annotated[
            str | None, Field(description="the checkpoint to stop; none stops every engine")
        ] = None,
    ) -> Annotated[CallToolResult, StopAnswer]:
        """Stop an engine started with start_local (or all of them)."""
        name = LocalTarget(checkpoint).default_name if checkpoint else None
        stopped, absent = await anyio.to_thread.run_sync(engines.stop, name)
        parts = [f"{each}: stopped" for each in stopped]
        parts.extend(f"{each}: was not running" for each in absent)
        answer = StopAnswer(stopped=stopped, not_running=absent)
        return reply("\n".join(parts) or "no engine was running", answer)
