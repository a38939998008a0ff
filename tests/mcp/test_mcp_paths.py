"""The MCP server reads files only by name from its own results folder, through the real client.

Whatever a path names (a real file, a missing one, a folder, the home directory), the answer is
the same refusal, so an assistant learns nothing about the machine; odd names are refused by the
command line's own rule before any work starts.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from mcp import Client

from sagemeter.mcp import ServerConfig, build_server
from tests.conftest import reference_file
from tests.mcp_helpers import error_line, ok

OUTSIDE = ["/etc/passwd", "/etc/no-such-file.json", "~/.bashrc", "../x.json", "a/b.json", "/tmp"]


@pytest.fixture
def results(tmp_path: Path) -> Path:
    folder = tmp_path / "results"
    folder.mkdir()
    for name in ("measure-gemma-4-e2b.json", "measure-gemma-4-e2b-qat.json"):
        shutil.copy(reference_file(name), folder / name)
    (tmp_path / "outside.jsonl").write_text('{"prompt": "2+2?", "answer": "4", "family": "x"}\n')
    return folder


async def test_paths_outside_the_results_folder_all_get_the_same_refusal(
    results: Path, tmp_path: Path
) -> None:
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        answers = set()
        for path in [*OUTSIDE, str(tmp_path / "outside.jsonl")]:
            line = error_line(
                await client.call_tool("compare_results", {"results": [path, "gemma-4-e2b"]})
            )
            assert "other paths are never read" in line
            answers.add(line.replace(repr(path[:60]), "PATH"))
        assert len(answers) == 1  # nothing in the wording says whether the path exists
        for questions in ["/etc/passwd", str(tmp_path / "outside.jsonl"), "../outside.jsonl"]:
            line = error_line(
                await client.call_tool(
                    "measure_endpoint",
                    {"target": "http://127.0.0.1:9", "questions": questions, "quick": True},
                )
            )
            assert "other paths are never read" in line and "built-in set" in line
        (tmp_path / "outside.gguf").write_bytes(b"GGUF")
        for target in [f" local:{tmp_path / 'outside.gguf'}", " vllm:/etc", "\tlocal:/no.gguf"]:
            line = error_line(
                await client.call_tool("measure_endpoint", {"target": target, "quick": True})
            )
            assert "other paths are never read" in line  # a leading space is no way around it
        # By name, from the folder, it works.
        compared = ok(
            await client.call_tool(
                "compare_results", {"results": ["gemma-4-e2b", "measure-gemma-4-e2b-qat.json"]}
            )
        )
        assert compared["names"] == ["gemma-4-e2b", "gemma-4-e2b-qat"]


@pytest.mark.parametrize("name", ["n" * 300, "n" * 5000, "a\x00b", "tab\tname", ".hidden"])
async def test_odd_names_are_refused_before_any_work(results: Path, name: str) -> None:
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        line = error_line(
            await client.call_tool(
                "measure_endpoint", {"target": "http://127.0.0.1:9", "name": name, "quick": True}
            )
        )
    assert "1–100 letters" in line and "does not answer" not in line
    assert not list(results.glob("measure-n*"))


@pytest.mark.parametrize("name", ["n" * 300, "../up", "a/b", ".hidden"])
async def test_a_comparison_name_is_refused_before_any_result_is_read(
    results: Path, name: str
) -> None:
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        line = error_line(
            await client.call_tool(
                "compare_results", {"results": ["no-such-a", "no-such-b"], "name": name}
            )
        )
    assert "1–100 letters" in line and "no-such" not in line  # the results were never looked at
    assert not list(results.glob("compare-*"))
