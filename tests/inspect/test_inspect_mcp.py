"""inspect_checkpoint through the MCP SDK's own client, in process against the real server."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from sagemeter.inspect.build import inspect_sources
from sagemeter.mcp import ServerConfig, build_server
from tests.mcp_helpers import error_line, ok, text_of

pytestmark = pytest.mark.slow


async def test_inspect_checkpoint_answers_facts_ceiling_and_ratio(tmp_path: Path) -> None:
    expected = inspect_sources(["local:smollm2-q4_1"], gpu="T4").checkpoints[0]
    async with Client(build_server(ServerConfig(results_dir=tmp_path))) as client:
        result = await client.call_tool(
            "inspect_checkpoint",
            {"sources": ["local:smollm2-q4_1", "local:smollm2-q4_1"], "gpu": "T4"},
        )
        answer = ok(result)
        first, second = answer["checkpoints"]
        assert first == second == expected.model_dump(mode="json")
        assert answer["predicted_ratios"] == [
            {"reference": "local:smollm2-q4_1", "candidate": "local:smollm2-q4_1", "ratio": 1.0}
        ]
        text = text_of(result)
        assert "transformer body" in text and "GGUF Q4_1 (99.8%), F32 (0.2%)" in text
        assert "decode ceiling on T4 (320 GB/s)" in text

        for arguments, needle in [
            ({"sources": ["nope/missing.safetensors"]}, "other paths are never read"),
            ({"sources": ["missing.safetensors"]}, "no such file in the results folder"),
            ({"sources": ["local:smollm2-q4_1"], "gpu": "K80"}, "not in the table"),
            ({"sources": []}, "sources"),
            ({"sources": ["local:smollm2-q4_1"], "bandwidth_gb_s": -1}, "bandwidth_gb_s"),
        ]:
            assert needle in error_line(await client.call_tool("inspect_checkpoint", arguments))
