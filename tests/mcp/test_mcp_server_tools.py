"""A tool's description is made once per process (`sagemeter.mcp.server_tools`): every server
still lists exactly what the SDK itself makes of its tools, and each calls its own functions."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, cast

from mcp import Client
from mcp.server import MCPServer

from sagemeter.mcp import ServerConfig, build_server
from sagemeter.mcp.engines import LocalEngines
from sagemeter.mcp.experiment_tools import register_experiment_tools
from sagemeter.mcp.inspect_tools import register_inspect_tools
from sagemeter.mcp.local_tools import register_local_tools
from sagemeter.mcp.measure_tools import register_measure_tools
from sagemeter.mcp.sagemaker_read import register_sagemaker_reads
from sagemeter.mcp.sagemaker_write import register_sagemaker_writes
from sagemeter.mcp.slo_tools import register_slo_tools
from tests.conftest import reference_file
from tests.mcp_helpers import error_line, ok


def _sdk_made(config: ServerConfig) -> MCPServer[Any]:
    """The same tools registered on the SDK's own server, each described by the SDK afresh."""
    server: Any = MCPServer("reference")
    register_sagemaker_reads(server, config)
    register_sagemaker_writes(server, config)
    register_local_tools(server, LocalEngines(config.results_dir), config)
    register_measure_tools(server, config)
    register_inspect_tools(server, config)
    register_experiment_tools(server, config)
    register_slo_tools(server, config)
    return cast(MCPServer[Any], server)


async def test_every_server_lists_what_the_sdk_makes_of_its_tools(tmp_path: Path) -> None:
    configs = [
        ServerConfig(results_dir=tmp_path / "a"),
        ServerConfig(
            results_dir=tmp_path / "b", allow_write=True, allow_logs=True, allow_commands=True
        ),
    ]
    for config in configs:
        built = [tool.model_dump() for tool in await build_server(config).list_tools()]
        fresh = [tool.model_dump() for tool in await _sdk_made(config).list_tools()]
        assert len(built) == 16 and built == fresh


async def test_each_server_calls_its_own_tools(tmp_path: Path) -> None:
    full, empty = tmp_path / "full", tmp_path / "empty"
    full.mkdir()
    empty.mkdir()
    for name in ("measure-gemma-4-e2b.json", "measure-gemma-4-e2b-qat.json"):
        shutil.copy(reference_file(name), full / name)
    first = build_server(ServerConfig(results_dir=full))
    second = build_server(ServerConfig(results_dir=empty))  # described like the first's
    names = {"results": ["gemma-4-e2b", "gemma-4-e2b-qat"]}
    async with Client(second) as client:
        assert "gemma-4-e2b" in error_line(await client.call_tool("compare_results", names))
    async with Client(first) as client:
        compared = ok(await client.call_tool("compare_results", names))
        assert compared["names"] == ["gemma-4-e2b", "gemma-4-e2b-qat"]
