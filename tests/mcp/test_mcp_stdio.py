"""`sagemeter mcp` as an MCP client starts it: a real subprocess over stdio (and once over HTTP),
spoken to by the SDK's own clients. AWS is moto's server on loopback, passed in the environment.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest
from mcp import Client, StdioServerParameters

from sagemeter import sagemaker as sm
from sagemeter.engines.ports import free_port
from tests.mcp_helpers import alive, error_line, ok

pytestmark = pytest.mark.slow

if TYPE_CHECKING:
    from tests.sagemaker_fakes import World


# (read_only, destructive, idempotent, open_world) per tool: what each tool tells a client.
ANNOTATIONS = {
    "check_quota": (True, False, True, True),
    "get_price": (True, False, True, True),
    "deploy_endpoint": (False, False, False, True),
    "endpoint_status": (True, False, True, True),
    "list_endpoints": (True, False, True, True),
    "endpoint_logs": (True, False, True, True),
    "invoke_endpoint": (True, False, True, True),
    "measure_endpoint": (False, False, False, True),
    "compare_results": (False, False, True, False),
    "delete_endpoint": (False, True, True, True),
    "list_checkpoints": (True, False, True, False),
    "start_local": (False, False, True, False),
    "stop_local": (False, True, True, False),
    "inspect_checkpoint": (True, False, True, True),
    "run_experiment": (False, False, False, True),
    "find_operating_point": (False, False, False, True),
}
REQUIRED = {
    "check_quota": ["instance_type"],
    "get_price": ["instance_type"],
    "deploy_endpoint": ["name", "model_id"],
    "endpoint_status": ["endpoint"],
    "endpoint_logs": ["endpoint"],
    "invoke_endpoint": ["endpoint", "prompt"],
    "measure_endpoint": ["target"],
    "compare_results": ["results"],
    "delete_endpoint": ["endpoint", "confirm"],
    "inspect_checkpoint": ["sources"],
    "find_operating_point": ["target", "name"],
}


def _command(*flags: str) -> list[str]:
    return [sys.executable, "-m", "sagemeter", "mcp", *flags]


def _check_tools(tools: list[Any]) -> None:
    assert sorted(tool.name for tool in tools) == sorted(ANNOTATIONS)
    for tool in tools:
        hints = tool.annotations
        assert (
            hints.read_only_hint,
            hints.destructive_hint,
            hints.idempotent_hint,
            hints.open_world_hint,
        ) == ANNOTATIONS[tool.name], tool.name
        assert tool.title and tool.description, tool.name
        schema = tool.input_schema
        assert schema["type"] == "object"
        assert sorted(schema.get("required", [])) == sorted(REQUIRED.get(tool.name, []))
        for name, prop in schema.get("properties", {}).items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"
        assert tool.output_schema and tool.output_schema["type"] == "object", tool.name


async def test_stdio_lists_tools_and_answers_for_real(world: World) -> None:
    sm.deploy(
        sm.make_spec(
            name="gemma-4-e2b",
            model_id="google/gemma-4-E2B-it",
            region="us-east-2",
            role_arn=world.role,
        ),
        poll_s=0.02,
    )
    params = StdioServerParameters(command=_command()[0], args=_command()[1:], env=dict(os.environ))
    async with Client(params, read_timeout_seconds=120) as client:
        _check_tools((await client.list_tools()).tools)
        checkpoints = ok(await client.call_tool("list_checkpoints", {}))["checkpoints"]
        assert [row["name"] for row in checkpoints] == ["smollm2-q4_1", "smollm2-f32"]
        status = ok(await client.call_tool("endpoint_status", {"endpoint": "gemma-4-e2b"}))
        assert status["status"] == "InService" and status["region"] == "us-east-2"
        assert status["ours"] and not status["orphan"]
        refused = await client.call_tool(
            "delete_endpoint", {"endpoint": "gemma-4-e2b", "confirm": "gemma-4-e2b"}
        )
        assert "--allow-write" in error_line(refused)
        pid = ok(await client.call_tool("start_local", {"parallel": 2}))["pid"]
        assert alive(pid)
    assert "gemma-4-e2b" in world.moto.backend("us-east-2").endpoints
    # The client closed the server's stdin: the server ended, and its engine with it.
    deadline = time.monotonic() + 30
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid)


async def test_http_serves_on_loopback(sagemeter_env: dict[str, str]) -> None:
    port = free_port()
    process = subprocess.Popen(
        _command("--http", str(port)),
        env=sagemeter_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert process.poll() is None, process.communicate()
            time.sleep(0.1)
        async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=60) as client:
            _check_tools((await client.list_tools()).tools)
            engines = ok(await client.call_tool("stop_local", {}))
            assert engines == {"stopped": [], "not_running": []}
    finally:
        process.terminate()
        stdout, stderr = process.communicate(timeout=30)
    assert stdout == ""  # the protocol and the logs never share stdout
    assert f"sagemeter mcp on http://127.0.0.1:{port}/mcp" in stderr
