"""inspect_checkpoint: the CLI's `inspect`, what a checkpoint stores and the decode it allows.

Read-only: it reads headers (local files, or a Hub model by range requests), never weights,
and writes nothing.
"""

from typing import Annotated, Any

import anyio.to_thread
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from sagemeter.inspect.build import inspect_sources
from sagemeter.inspect.text import report_text
from sagemeter.mcp import names
from sagemeter.mcp.config import ServerConfig
from sagemeter.mcp.guard import guarded, reply
from sagemeter.mcp.server_tools import ServerTools
from sagemeter.options.faces import read_options, with_options
from sagemeter.options.inspect import INSPECT, InspectOptions
from sagemeter.results.checkpoint_facts import InspectReport

INSPECTS = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)


def register_inspect_tools(server: ServerTools, config: ServerConfig) -> None:
    """Add inspect_checkpoint to `server`."""

    @server.tool(title="Inspect a checkpoint", annotations=INSPECTS)
    @guarded
    @with_options(INSPECT, "mcp")  # gpu, bandwidth_gb_s, grid_check: inspect's options model
    async def inspect_checkpoint(
        sources: Annotated[
            list[str],
            Field(
                min_length=1,
                description="each hf:ORG/NAME[@REVISION], local:NAME or vllm:NAME (a built-in "
                "checkpoint or a .gguf file in the results folder), or the name of a "
                ".safetensors/.gguf file or a folder in the server's results folder; the first "
                "is the reference of the ratios",
            ),
        ],
        **options: Any,
    ) -> Annotated[CallToolResult, InspectReport]:
        """What each checkpoint stores, grouped by role (per-layer embedding, vocabulary
        embedding, transformer body, audio and vision towers), the bytes a decoded token reads,
        the decode ceiling on a GPU, and each later checkpoint's predicted decode ratio against
        the first. Reads headers only (Hub models by range requests); deploys nothing.
        """

        (given,) = read_options(INSPECT, options, "mcp")
        assert isinstance(given, InspectOptions)
        allowed = [names.checkpoint_source(config, source) for source in sources]

        def run() -> InspectReport:
            return inspect_sources(
                allowed, gpu=given.gpu, bandwidth_gb_s=given.bandwidth, check_grid=given.grid_check
            )

        report = await anyio.to_thread.run_sync(run)
        return reply(report_text(report), report)
