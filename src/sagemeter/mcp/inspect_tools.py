"""inspect_checkpoint: the CLI's `inspect`, what a checkpoint stores and the decode it allows.

Read-only: it reads headers (local files, or a Hub model by range requests), never weights,
and writes nothing.
"""

from typing import Annotated

import anyio.to_thread
from mcp.server import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from sagemeter.inspect.build import inspect_sources
from sagemeter.inspect.text import report_text
from sagemeter.mcp import names
from sagemeter.mcp.config import ServerConfig
from sagemeter.mcp.guard import guarded, reply
from sagemeter.results.checkpoint_facts import InspectReport

INSPECTS = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)


def register_inspect_tools(server: MCPServer, config: ServerConfig) -> None:
    """Add inspect_checkpoint to `server`."""

    @server.tool(title="Inspect a checkpoint", annotations=INSPECTS)
    @guarded
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
        gpu: Annotated[
            str | None,
            Field(
                description="a GPU (L4, T4, A10G, L40S, A100, H100, H200, MI300X) or a "
                "SageMaker instance type, for the decode ceiling"
            ),
        ] = None,
        bandwidth_gb_s: Annotated[
            float | None,
            Field(
                gt=0,
                le=1e6,
                allow_inf_nan=False,
                description="a memory bandwidth in GB/s, instead of gpu",
            ),
        ] = None,
        grid_check: Annotated[
            bool,
            Field(description="check whether 16/32-bit body weights sit on a 4-bit grid (QAT)"),
        ] = False,
    ) -> Annotated[CallToolResult, InspectReport]:
        """What each checkpoint stores, grouped by role (per-layer embedding, vocabulary
        embedding, transformer body, audio and vision towers), the bytes a decoded token reads,
        the decode ceiling on a GPU, and each later checkpoint's predicted decode ratio against
        the first. Reads headers only (Hub models by range requests); deploys nothing.
        """

        allowed = [names.checkpoint_source(config, source) for source in sources]

        def run() -> InspectReport:
            return inspect_sources(
                allowed, gpu=gpu, bandwidth_gb_s=bandwidth_gb_s, check_grid=grid_check
            )

        report = await anyio.to_thread.run_sync(run)
        return reply(report_text(report), report)
