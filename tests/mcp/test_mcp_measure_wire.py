"""measure_endpoint's wire knobs (`timeout_s`, `stall_s`, `retries`) through the real MCP client,
against the calibrated truth server misbehaving on purpose.

A server that reads the request and never answers must end the call with one clear sentence
naming the timeout given, not the default 120 s; a stream that pauses mid-reply must be called
stalled after the `stall_s` given. No file is left either way.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.faults import Faults
from sagemeter.mcp import ServerConfig, build_server
from tests.mcp_helpers import error_line

TRUTH = TruthTiming(ttft_s=0.05, itl_s=0.01)


@pytest.mark.timeout(90)  # the default 120 s timeout would end the test here, not pass it
async def test_a_silent_server_ends_the_call_at_the_timeout_given(tmp_path: Path) -> None:
    results = tmp_path / "results"
    with running_truth_server(TRUTH, faults=Faults(silent=True)) as url:
        async with Client(build_server(ServerConfig(results_dir=results))) as client:
            answer = await client.call_tool(
                "measure_endpoint",
                {"target": url, "quick": True, "timeout_s": 1.5, "stall_s": 1, "retries": 0},
            )
    line = error_line(answer)
    assert "does not answer as a chat API" in line
    assert "timeout: no complete response within 1.5 s" in line
    assert not list(results.glob("measure-*.json"))


@pytest.mark.timeout(90)
async def test_a_stalled_stream_is_called_stalled_after_the_stall_given(tmp_path: Path) -> None:
    results = tmp_path / "results"
    faults = Faults(stall_every=1, stall_s=60, stall_after=1)
    with running_truth_server(TRUTH, faults=faults) as url:
        async with Client(build_server(ServerConfig(results_dir=results))) as client:
            answer = await client.call_tool(
                "measure_endpoint",
                {"target": url, "quick": True, "timeout_s": 30, "stall_s": 0.5, "retries": 0},
            )
    line = error_line(answer)
    assert "stalled: no byte for 0.5 s" in line, line
    assert not list(results.glob("measure-*.json"))
