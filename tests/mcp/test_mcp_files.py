"""Every MCP tool that takes a file reads only regular files inside its results folder.

One class of test, through the real MCP client: for each tool argument that names a file (or a
`local:`/`vllm:` checkpoint file), a path outside the folder that exists and one that does not,
`../x`, a symlink in the folder that leads out (to a file that exists and to one that does
not), a link to itself, a named pipe and a folder in the folder all get the same refusal, word
for word once the name given is taken out, so the answer tells nothing about the machine.
Nothing is read or started.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from sagemeter.mcp import ServerConfig, build_server
from tests.conftest import reference_file
from tests.mcp_helpers import error_line, ok

QUESTION = '{"prompt": "2+2?", "answer": "4", "family": "x"}\n'
PLAN = """name = "files"

[measure]
questions = "{questions}"

[[arm]]
name = "a"
target = "http://127.0.0.1:9"

[[arm]]
name = "b"
target = "{target}"
"""


@dataclass(frozen=True)
class Argument:
    """One tool argument that names a file: the call that gives it NAME, and the file's kind."""

    tool: str
    suffix: str
    call: Callable[[str], dict[str, Any]]


ARGUMENTS = {
    "compare_results.results": Argument(
        "compare_results", ".json", lambda name: {"results": [name, "gemma-4-e2b"]}
    ),
    "measure_endpoint.questions": Argument(
        "measure_endpoint",
        ".jsonl",
        lambda name: {"target": "http://127.0.0.1:9", "questions": name, "quick": True},
    ),
    "measure_endpoint.target local:": Argument(
        "measure_endpoint", ".gguf", lambda name: {"target": f"local:{name}", "quick": True}
    ),
    "measure_endpoint.target vllm:": Argument(
        "measure_endpoint", ".gguf", lambda name: {"target": f"vllm:{name}", "quick": True}
    ),
    "start_local.checkpoint": Argument("start_local", ".gguf", lambda name: {"checkpoint": name}),
    "inspect_checkpoint.sources": Argument(
        "inspect_checkpoint", ".gguf", lambda name: {"sources": [name]}
    ),
    "inspect_checkpoint.sources local:": Argument(
        "inspect_checkpoint", ".gguf", lambda name: {"sources": [f"local:{name}"]}
    ),
    "inspect_checkpoint.sources vllm:": Argument(
        "inspect_checkpoint", ".gguf", lambda name: {"sources": [f"vllm:{name}"]}
    ),
    "run_experiment.plan_file": Argument(
        "run_experiment", ".toml", lambda name: {"plan_file": name, "dry_run": True}
    ),
    "run_experiment.plan questions": Argument(
        "run_experiment",
        ".jsonl",
        lambda name: {
            "plan": PLAN.format(questions=name, target="http://127.0.0.1:9"),
            "dry_run": True,
        },
    ),
    "run_experiment.plan target": Argument(
        "run_experiment",
        ".gguf",
        lambda name: {
            "plan": PLAN.format(questions="mine.jsonl", target=f"local:{name}"),
            "dry_run": True,
        },
    ),
    "run_experiment.resume": Argument(
        "run_experiment", "", lambda name: {"resume": name, "dry_run": True}
    ),
}


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A results folder with good files, and outside it the files a bad name points at; the
    server's working folder is the outside one (a name must never be looked up there)."""
    results = tmp_path / "results"
    (results / "runs").mkdir(parents=True)
    for name in ("measure-gemma-4-e2b.json", "measure-gemma-4-e2b-qat.json"):
        shutil.copy(reference_file(name), results / name)
    (results / "mine.jsonl").write_text(QUESTION)
    outside = tmp_path / "outside"
    outside.mkdir()
    monkeypatch.chdir(outside)
    return tmp_path


def _bad_names(place: Path, suffix: str, tool: str) -> dict[str, str]:
    """Each bad case's name, the files it points at made first."""
    results, outside = place / "results", place / "outside"
    folder = results / "runs" if tool == "run_experiment" and not suffix else results
    real = outside / f"real{suffix}"
    if suffix:
        real.write_text(QUESTION if suffix == ".jsonl" else "GGUF")
    else:
        real.mkdir()
        (real / "journal.json").write_text("{}")
    (place / f"up{suffix}").write_text("x")
    (folder / f"link-out{suffix}").symlink_to(real)
    (folder / f"link-nowhere{suffix}").symlink_to(outside / f"missing{suffix}")
    os.mkfifo(folder / f"pipe{suffix}")
    (folder / f"loop{suffix}").symlink_to(folder / f"loop{suffix}")
    # A folder (where a file is wanted; where a folder may be given, one holding a link out).
    (folder / f"folder{suffix}").mkdir()
    (folder / f"folder{suffix}" / "inner").symlink_to(real)
    wrong = {"folder": f"folder{suffix}"}
    if not suffix:  # a run folder is wanted: a file is the wrong kind
        (folder / "a-file").write_text("x")
        wrong["file"] = "a-file"
    return {
        "outside, exists": str(real),
        "outside, missing": str(outside / f"missing{suffix}"),
        "up": f"../up{suffix}",
        "link out": f"link-out{suffix}",
        "link out, missing": f"link-nowhere{suffix}",
        "pipe": f"pipe{suffix}",
        "link loop": f"loop{suffix}",
        **wrong,
    }


@pytest.mark.timeout(60)  # a pipe opened by mistake would block here, not pass
@pytest.mark.parametrize("argument", list(ARGUMENTS), ids=list(ARGUMENTS))
async def test_every_file_argument_refuses_what_leaves_the_folder_alike(
    argument: str, place: Path
) -> None:
    spec = ARGUMENTS[argument]
    names = _bad_names(place, spec.suffix, spec.tool)
    results = place / "results"
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        lines = {
            case: error_line(await client.call_tool(spec.tool, spec.call(name)))
            for case, name in names.items()
        }
    shapes = {line.replace(repr(names[case][:60]), "NAME") for case, line in lines.items()}
    assert len(shapes) == 1, lines  # one answer: nothing says what exists outside
    shape = shapes.pop()
    assert "NAME" in shape and "other paths are never read" in shape, shape
    assert not list((results / "runs").glob("*files*"))  # no run was started


async def test_a_name_is_never_looked_up_in_the_working_folder(place: Path) -> None:
    """`local:here.gguf` with here.gguf in the server's working folder: the answer is the one a
    name missing from the results folder gets, whether or not the working folder has it."""
    (place / "outside" / "here.gguf").write_text("GGUF")
    async with Client(build_server(ServerConfig(results_dir=place / "results"))) as client:
        for tool, call in [
            ("inspect_checkpoint", lambda name: {"sources": [f"local:{name}"]}),
            ("inspect_checkpoint", lambda name: {"sources": [name]}),
            ("start_local", lambda name: {"checkpoint": name}),
        ]:
            here = error_line(await client.call_tool(tool, call("here.gguf")))
            absent = error_line(await client.call_tool(tool, call("absent.gguf")))
            assert here.replace("here", "X") == absent.replace("absent", "X"), (here, absent)
            assert "no such file in the results folder" in here


async def test_files_and_links_inside_the_folder_are_read(place: Path) -> None:
    """The rule refuses only what leaves: a link to a file of the folder is that file."""
    results = place / "results"
    (results / "alias.jsonl").symlink_to(results / "mine.jsonl")
    plan = PLAN.format(questions="alias.jsonl", target="http://127.0.0.1:9")
    (results / "plan.toml").write_text(plan)
    (results / "plan-link.toml").symlink_to(results / "plan.toml")
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        given = ok(await client.call_tool("run_experiment", {"plan": plan, "dry_run": True}))
        linked = ok(
            await client.call_tool(
                "run_experiment", {"plan_file": "plan-link.toml", "dry_run": True}
            )
        )
    assert given["state"] == linked["state"] == "planned"
