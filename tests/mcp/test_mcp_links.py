"""Every MCP tool that takes a name which becomes a path reads only regular files inside its
results folder, through the real client: a symlink in the folder that leads out of it is
refused with the same answer whether what it points at exists or not (and the same as the
outside path given directly); files in the server's working folder are never read; outputs
are never written through a link."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from sagemeter.mcp import ServerConfig, build_server
from tests.conftest import reference_file
from tests.mcp_helpers import error_line

Call = tuple[str, dict[str, Any]]
PLAN = """name = "p"
[measure]
quick = true
{questions}
[[arm]]
name = "a"
target = "{a}"
[[arm]]
name = "b"
target = "http://127.0.0.1:9"
"""

# What each face is given, as a function of a name in the results folder (`NAME.SUFFIX`).
FACES: dict[str, tuple[str, Callable[[str], Call]]] = {
    "compare_results": (".json", lambda n: ("compare_results", {"results": [n, n]})),
    "measure questions": (
        ".jsonl",
        lambda n: ("measure_endpoint", {"target": "http://127.0.0.1:9", "questions": n}),
    ),
    "measure local:": (".gguf", lambda n: ("measure_endpoint", {"target": f"local:{n}"})),
    "measure vllm:": ("", lambda n: ("measure_endpoint", {"target": f"vllm:{n}"})),
    "inspect file": (".gguf", lambda n: ("inspect_checkpoint", {"sources": [n]})),
    "inspect folder": ("", lambda n: ("inspect_checkpoint", {"sources": [n]})),
    "inspect local:": (".gguf", lambda n: ("inspect_checkpoint", {"sources": [f"local:{n}"]})),
    "start_local": (".gguf", lambda n: ("start_local", {"checkpoint": n})),
    "run plan_file": (".toml", lambda n: ("run_experiment", {"plan_file": n})),
    "run resume": ("", lambda n: ("run_experiment", {"resume": n})),
    "plan questions": (
        ".jsonl",
        lambda n: (
            "run_experiment",
            {"plan": PLAN.format(questions=f'questions = "{n}"', a="http://127.0.0.1:9")},
        ),
    ),
    "plan local:": (
        ".gguf",
        lambda n: ("run_experiment", {"plan": PLAN.format(questions="", a=f"local:{n}")}),
    ),
}


def _outside(tmp_path: Path) -> Path:
    """Real files and folders outside the results folder, one per suffix."""
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(reference_file("measure-gemma-4-e2b.json"), outside / "real.json")
    (outside / "real.jsonl").write_text('{"prompt": "2+2?", "answer": "4", "family": "x"}\n')
    (outside / "real.gguf").write_bytes(b"GGUF" + bytes(64))
    (outside / "real.toml").write_text(PLAN.format(questions="", a="http://127.0.0.1:9"))
    (outside / "real").mkdir()
    (outside / "real" / "config.json").write_text("{}")
    return outside


def _answers(face: str, results: Path, outside: Path) -> dict[str, Call]:
    """The face's call for: a link to a real outside file, a link to a missing one, and the
    same two outside paths given directly."""
    suffix, call = FACES[face]
    where = results / "runs" if face == "run resume" else results
    where.mkdir(exist_ok=True)
    (where / f"to-real{suffix}").symlink_to(outside / f"real{suffix}")
    (where / f"to-missing{suffix}").symlink_to(outside / f"missing{suffix}")
    return {
        "link to a real file": call(f"to-real{suffix}"),
        "link to a missing file": call(f"to-missing{suffix}"),
        "outside path, real": call(str(outside / f"real{suffix}")),
        "outside path, missing": call(str(outside / f"missing{suffix}")),
    }


def _same(line: str, *names: str) -> str:
    for name in names:
        line = line.replace(repr(name[:60]), "NAME").replace(name, "NAME")
    return line


@pytest.mark.parametrize("face", list(FACES))
async def test_a_link_out_of_the_folder_gets_one_answer_whether_its_target_exists(
    face: str, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    results.mkdir()
    outside = _outside(tmp_path)
    calls = _answers(face, results, outside)
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        lines = {}
        for case, (tool, arguments) in calls.items():
            lines[case] = error_line(await client.call_tool(tool, arguments))
    for case, line in lines.items():
        assert str(outside) not in line.replace(str(results), ""), (case, line)
        assert "no such" not in line and "does not exist" not in line, (case, line)
    names = [str(outside / f"{stem}{FACES[face][0]}") for stem in ("real", "missing")]
    names += [f"to-{stem}{FACES[face][0]}" for stem in ("real", "missing")]
    assert len({_same(line, *names) for line in lines.values()}) == 1, lines
    assert not list(results.glob("measure-*")) and not list(results.glob("engine-*"))


async def test_a_checkpoint_in_the_servers_working_folder_is_never_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = tmp_path / "results"
    results.mkdir()
    here = tmp_path / "cwd"
    here.mkdir()
    (here / "here.gguf").write_bytes(b"GGUF" + bytes(64))
    monkeypatch.chdir(here)
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        lines = [
            error_line(await client.call_tool("inspect_checkpoint", {"sources": [source]}))
            for source in ("local:here.gguf", "local:absent.gguf", "here.gguf", "absent.gguf")
        ]
    assert len({_same(line, "here.gguf", "absent.gguf") for line in lines}) <= 2
    assert _same(lines[0], "here.gguf") == _same(lines[1], "absent.gguf")
    assert _same(lines[2], "here.gguf") == _same(lines[3], "absent.gguf")
    assert all(str(here) not in line for line in lines)


@pytest.mark.parametrize(
    ("made", "call"),
    [
        ("measure-n.json", ("measure_endpoint", {"target": "http://127.0.0.1:9", "name": "n"})),
        ("engine-n.log", ("measure_endpoint", {"target": "http://127.0.0.1:9", "name": "n"})),
        (
            "compare-c.json",
            ("compare_results", {"results": ["gemma-4-e2b", "gemma-4-e2b"], "name": "c"}),
        ),
        ("load-o.json", ("find_operating_point", {"target": "http://127.0.0.1:9", "name": "o"})),
    ],
    ids=["measure result", "engine log", "comparison", "operating point"],
)
async def test_no_output_is_written_through_a_link(made: str, call: Call, tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(reference_file("measure-gemma-4-e2b.json"), results / "measure-gemma-4-e2b.json")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (results / made).symlink_to(victim)
    tool, arguments = call
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        line = error_line(await client.call_tool(tool, arguments))
    assert "symbolic link" in line, line
    assert victim.read_text() == "keep me"


async def test_no_run_is_written_through_a_runs_link(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (results / "runs").symlink_to(elsewhere)
    plan = PLAN.format(questions="", a="http://127.0.0.1:9")
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        line = error_line(await client.call_tool("run_experiment", {"plan": plan}))
    assert "only written inside the results folder" in line, line
    assert not list(elsewhere.iterdir())
