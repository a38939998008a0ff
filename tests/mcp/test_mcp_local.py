"""The MCP tools of the embedded engine, through the SDK's in-process client against the server.

A real llama.cpp engine is started by `start_local` itself (the tool under test), measured twice
with quick settings, compared, and stopped; nothing below the client is faked.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client

from sagemeter.mcp import ServerConfig, build_server
from tests.busy_host import assert_decode_rate_or_busy
from tests.mcp_helpers import Progress, alive, error_line, ok, text_of


@pytest.mark.slow
async def test_checkpoints_start_measure_compare_stop(tmp_path: Path) -> None:
    results = tmp_path / "results"
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        listed = ok(await client.call_tool("list_checkpoints", {}))
        assert [row["name"] for row in listed["checkpoints"]] == ["smollm2-q4_1", "smollm2-f32"]
        q4 = listed["checkpoints"][0]
        assert q4["available"] and q4["storage"] == "Q4_1" and 5 < q4["bits_per_weight"] < 6

        started = ok(await client.call_tool("start_local", {"checkpoint": "smollm2-q4_1"}))
        target = started["target"]
        assert target.startswith("http://127.0.0.1:") and target.endswith("/v1")
        assert not started["already_running"] and Path(started["log_path"]).is_file()
        assert httpx.get(target.removesuffix("/v1") + "/health").status_code == 200
        again = ok(await client.call_tool("start_local", {"checkpoint": "smollm2-q4_1"}))
        assert again["already_running"] and again["target"] == target

        # Twice, by its URL: one engine start for the whole test.
        measured = []
        for name in ("first", "second"):
            progress = Progress()
            result = await client.call_tool(
                "measure_endpoint",
                {"target": target, "name": name, "quick": True},
                progress_callback=progress,
            )
            answer = ok(result)
            assert answer["quick"] and answer["failed_requests"] == 0
            assert_decode_rate_or_busy(answer)
            assert set(answer["load_tokens_per_second"]) == {"1", "4"}
            assert answer["quality"].endswith("/6")
            assert Path(answer["path"]) == results / f"measure-{name}.json"
            assert f"wrote {answer['path']}" in text_of(result)
            values = [p for p, _, _ in progress.seen]
            assert values == sorted(set(values)) and values[0] == 0
            assert values[-1] == progress.seen[-1][1]  # the last notification reaches the total
            assert any("quality" in (m or "") for _, _, m in progress.seen)
            measured.append(answer)
        assert measured[0]["target"] == target
        assert measured[0]["weights_gib"] is None  # a bare URL has no start-up log to read

        clash = await client.call_tool(
            "measure_endpoint", {"target": target, "name": "first", "quick": True}
        )
        assert "already exists" in error_line(clash)

        compared = await client.call_tool(
            "compare_results", {"results": ["first", "second"], "price_per_hour": 1.0}
        )
        comparison = ok(compared)
        assert comparison["names"] == ["first", "second"]
        assert Path(comparison["path"]) == results / "compare-first-vs-second.json"
        written = json.loads(Path(comparison["path"]).read_text())
        assert written["rows"] == comparison["rows"]
        keys = [row["key"] for row in comparison["rows"]]
        assert "decode_tokens_per_second" in keys and "usd_per_million_tokens_c4" in keys
        assert "decode_tokens_per_second" in text_of(compared)

        pid = started["pid"]
        stopped = ok(await client.call_tool("stop_local", {"checkpoint": "smollm2-q4_1"}))
        assert stopped == {"stopped": ["smollm2-q4_1"], "not_running": []}
        assert not alive(pid)
        assert ok(await client.call_tool("stop_local", {}))["stopped"] == []


@pytest.mark.slow
async def test_a_cancelled_measurement_leaves_no_file(engine_url: str, tmp_path: Path) -> None:
    results = tmp_path / "results"
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        progress = Progress()
        async with anyio.create_task_group() as group:

            async def cancel_on_first_request(
                value: float, total: float | None, message: str | None
            ) -> None:
                await progress(value, total, message)
                if value >= 1:
                    group.cancel_scope.cancel()

            async def measure() -> None:
                await client.call_tool(
                    "measure_endpoint",
                    {"target": engine_url, "name": "cut", "long_tokens": 256},
                    progress_callback=cancel_on_first_request,
                )
                raise AssertionError("the measurement was not cancelled")

            group.start_soon(measure)
        assert any(value >= 1 for value, _, _ in progress.seen)
        assert not (results / "measure-cut.json").exists()
        # The server goes on answering after the cancellation.
        assert ok(await client.call_tool("list_checkpoints", {}))["checkpoints"]


async def test_bad_input_is_one_sentence(tmp_path: Path) -> None:
    async with Client(build_server(ServerConfig(results_dir=tmp_path))) as client:
        cases = [
            ({"target": "bogus"}, "accepted forms"),
            ({"target": "local:nope"}, "give smollm2-q4_1, smollm2-f32 or the name of a .gguf"),
            (
                {"target": "local:smollm2-q4_1", "short_tokens": 16, "long_tokens": 8},
                "long_tokens must be larger than short_tokens",
            ),
            ({"target": "local:smollm2-q4_1", "name": "../x"}, "name '../x'"),
        ]
        for arguments, needle in cases:
            assert needle in error_line(await client.call_tool("measure_endpoint", arguments))
        missing = await client.call_tool("compare_results", {"results": ["nope-a", "nope-b"]})
        assert "no measure-nope-a.json in the results folder" in error_line(missing)
        unknown = await client.call_tool("start_local", {"checkpoint": "nope"})
        assert "checkpoint 'nope': give smollm2-q4_1, smollm2-f32 or" in error_line(unknown)
        schema = await client.call_tool("start_local", {"parallel": 0})
        assert error_line(schema) == (
            "start_local: parallel: Input should be greater than or equal to 1 "
            "(see the tool's input schema)"
        )
