"""Every output of every command and face obeys one rule (`atomic.check_output_file`): a new name
or a regular file, never a device, FIFO or symlink, never one of the command's inputs, and an
existing file only with --force. Each refusal is one line, before any work, the file untouched.

The commands run in-process through click (a subprocess per case would cost a second each); a
few cases go through the real `sagemeter` command for the exit code and the one line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from sagemeter.errors import UserError
from tests import cli_run
from tests.conftest import reference_file

NOTHING = (
    "http://127.0.0.1:9"  # nothing listens: a check that came late shows as a connection error
)
KEEP = b'{"note": "keep me"}\n'
URL = "http://127.0.0.1:9/out"  # an argument-order slip: a target where a file name goes


@dataclass(frozen=True)
class Output:
    """One output of one command: its arguments with `{out}` (or `{dir}`, the folder `out` is
    in) where it goes; `as_input`, the arguments that give `{out}` as an input too; `scratch`
    when the file is rewritten each time (no --force; a log, a port file, a report);
    `force`, the arguments that ask to replace a file."""

    param: tuple[str, str]
    args: list[str]
    out: str = "out.json"
    as_input: list[str] | None = None
    scratch: bool = False
    force: tuple[str, ...] = ("--force",)
    other_result: str = "measure"  # a result of another kind, which no output replaces


MEASURE_ARGS = ["measure", "{dir}", NOTHING, "--name", "x"]
# Every file output of every command: the table the class test runs, and the one a new
# command's output must join (test_every_path_parameter_is_in_the_table).
FILE_OUTPUTS: dict[str, Output] = {
    "combine OUT": Output(
        ("combine", "out"),
        ["combine", "{out}", "{a}", "{b}"],
        as_input=["combine", "{out}", "{out}", "{b}"],
    ),
    "load --out": Output(
        ("load", "out"),
        ["load", NOTHING, "--out", "{out}"],
        as_input=["load", NOTHING, "--out", "{out}", "--trace", "{out}"],
    ),
    "load --csv": Output(
        ("load", "csv"),
        ["load", NOTHING, "--csv", "{out}"],
        out="out.csv",
        as_input=["load", NOTHING, "--csv", "{out}", "--trace", "{out}"],
    ),
    "selfcheck --out": Output(("selfcheck", "out"), ["selfcheck", "--out", "{out}"]),
    "fidelity collect OUT": Output(
        ("fidelity collect", "out"),
        ["fidelity", "collect", "{out}", NOTHING],
        as_input=["fidelity", "collect", "{out}", NOTHING, "--reference", "{out}"],
    ),
    "fidelity compare --out": Output(
        ("fidelity compare", "out"),
        ["fidelity", "compare", "{a}", "{b}", "--out", "{out}"],
        as_input=["fidelity", "compare", "{a}", "{out}", "--out", "{out}"],
    ),
    "measure's result": Output(
        ("measure", "out_dir"),
        MEASURE_ARGS,
        out="measure-x.json",
        as_input=[*MEASURE_ARGS, "--fidelity-reference", "{out}"],
        other_result="comparison",
    ),
    "measure's engine log": Output(
        ("measure", "out_dir"),
        MEASURE_ARGS,
        out="engine-x.log",
        as_input=[*MEASURE_ARGS, "--server-log", "{out}"],
        scratch=True,
        force=(),
    ),
    "sagemaker recommend --plan": Output(
        ("sagemaker recommend", "plan"),
        ["sagemaker", "recommend", "Qwen/Qwen3-0.6B", "--plan", "{out}"],
        out="plan.toml",
        as_input=["sagemaker", "recommend", "{out}", "--plan", "{out}"],
    ),
    "calibrate-server --port-file": Output(
        ("calibrate-server", "port_file"),
        ["calibrate-server", "--port-file", "{out}"],
        out="port.txt",
        as_input=["calibrate-server", "--port-file", "{out}", "--questions", "{out}"],
        scratch=True,
        force=(),
    ),
    "calibrate-server --arrival-log": Output(
        ("calibrate-server", "arrival_log"),
        ["calibrate-server", "--arrival-log", "{out}"],
        out="arrivals.jsonl",
        as_input=["calibrate-server", "--arrival-log", "{out}", "--questions", "{out}"],
        scratch=True,
        force=(),
    ),
    "report's report.md": Output(
        ("report", "run_dirs"), ["report", "{run}"], out="run/report.md", scratch=True, force=()
    ),
    "report's report.html": Output(
        ("report", "run_dirs"), ["report", "{run}"], out="run/report.html", scratch=True, force=()
    ),
}
# Every folder output: a folder, a new name or a link to a folder, nothing else.
FOLDER_OUTPUTS: dict[str, tuple[tuple[str, str], list[str]]] = {
    "measure OUT_DIR": (("measure", "out_dir"), ["measure", "{out}", NOTHING, "--name", "x"]),
    "demo --out": (("demo", "out"), ["demo", "--out", "{out}"]),
    "run --out": (("run", "out"), ["run", "{plan}", "--out", "{out}"]),
    "report --compare --out": (
        ("report", "out"),
        ["report", "--compare", "{run}", "{run2}", "--out", "{out}"],
    ),
    "mcp --results-dir": (("mcp", "results_dir"), ["mcp", "--results-dir", "{out}"]),
}
# The path parameters that are only read (a run folder given to --resume is the run's own).
INPUTS = {
    ("measure", "tokenizer"),
    ("measure", "fidelity_reference"),
    ("measure", "server_log"),
    ("combine", "files"),
    ("run", "plan"),
    ("run", "resume"),
    ("load", "trace"),
    ("load", "tokenizer"),
    ("fidelity collect", "reference"),
    ("fidelity compare", "a"),
    ("fidelity compare", "b"),
    ("fidelity compare", "floor"),
}

FILE_KINDS = ("device", "fifo", "symlink", "folder", "existing", "result", "input", "url")
FOLDER_KINDS = ("device", "fifo", "file", "dangling", "url")
EXPECTED = {
    "device": "is a device, not a regular file",
    "fifo": "is a FIFO, not a regular file",
    "symlink": "is a symbolic link",
    "folder": "is a folder; give a file name",
    "existing": "already exists; use --force",
    "result": ", never replaced by ",
    "input": "is also one of this command's inputs",
    "url": "looks like a URL or a target, not a file name",
}
PLAN = 'name = "t"\n[[arm]]\nname = "a"\ntarget = "{t}"\n[[arm]]\nname = "b"\ntarget = "{t}"\n'
COMPARISON = b'{"names": [], "files": [], "rows": []}\n'


def _cli() -> typer.Typer:
    from sagemeter.cli.app import COMMAND_MODULES

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.callback()
    def _group() -> None:
        pass

    import importlib

    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)
    return app


APP = _cli()


def _make(kind: str, out: Path, tmp: Path) -> None:
    """Put the thing of `kind` at `out`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if kind == "device":
        try:
            os.mknod(out, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # what /dev/null is
        except PermissionError:
            pytest.skip("making a device node needs root")
    elif kind == "fifo":
        os.mkfifo(out)
    elif kind == "symlink":
        target = tmp / "elsewhere.json"
        target.write_bytes(KEEP)
        out.symlink_to(target)
    elif kind == "folder":
        out.mkdir()
    elif kind == "dangling":
        out.symlink_to(tmp / "nowhere")
    elif kind in ("existing", "input", "file"):
        out.write_bytes(KEEP)


def _tree(root: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """Every name under `root` with its mode, inode and (for a regular file) its bytes: what
    a refused command must leave exactly as it was (no file replaced, no folder made)."""
    found = {}
    home = Path(os.environ["SAGEMETER_HOME"])  # each test's own (conftest)
    for path in sorted(root.rglob("*")):
        if home in path.parents or path == home:
            continue  # the state folder (the checkpoint cache a demo looks in), not an output
        info = path.lstat()
        data = path.read_bytes() if stat.S_ISREG(info.st_mode) else None
        found[str(path.relative_to(root))] = (info.st_mode, info.st_ino, data)
    return found


def _places(tmp: Path) -> dict[str, Path]:
    """The inputs every case may name: two result files, two run folders, a plan."""
    a, b = tmp / "a.json", tmp / "b.json"
    shutil.copyfile(reference_file("measure-gemma-4-e2b.json"), a)
    shutil.copyfile(reference_file("measure-gemma-4-e2b-qat.json"), b)
    for name in ("run", "run2"):
        (tmp / name).mkdir()
        shutil.copyfile(a, tmp / name / "measure-gemma-4-e2b.json")
        shutil.copyfile(b, tmp / name / "measure-gemma-4-e2b-qat.json")
    (tmp / "run-plan.toml").write_text(PLAN.format(t=NOTHING))
    return {"a": a, "b": b, "run": tmp / "run", "run2": tmp / "run2", "plan": tmp / "run-plan.toml"}


def _refused(args: list[str], expected: str, tmp: Path) -> None:
    """The command is refused with one line naming `expected`, exit 2, and nothing under
    `tmp` changed (no file replaced or made, no folder made)."""
    from sagemeter.errors import exit_code

    before = _tree(tmp)
    done = CliRunner().invoke(APP, args)
    if isinstance(done.exception, UserError):  # main() prints it as one line, exit 2
        message = str(done.exception)
        assert exit_code(done.exception) == 2
    else:  # a face that prints its own line (the sagemaker group)
        assert done.exit_code == 2, (args, done.output, done.exception)
        lines = done.output.strip().splitlines()
        assert len(lines) == 1, done.output
        message = lines[0]
    assert expected in message and "\n" not in message, message
    assert _tree(tmp) == before


FILE_CASES = [
    (name, kind)
    for name, output in FILE_OUTPUTS.items()
    for kind in FILE_KINDS
    if not (kind == "existing" and output.scratch)
    and not (kind == "input" and output.as_input is None)
    and not (kind == "url" and output.out.count("/"))  # a file inside a folder it names
    and not (kind == "url" and name.startswith("measure"))  # its folder's case below
]


@pytest.mark.timeout(60)  # a regression that lets calibrate-server start would serve on
@pytest.mark.parametrize(("name", "kind"), FILE_CASES)
def test_every_file_output_is_checked_before_work(
    name: str, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each bad kind of output, for every file output of every command: exit 2, one line,
    before any work, and nothing changed: the thing in the way keeps its inode and bytes."""
    monkeypatch.chdir(tmp_path)  # a slip's relative path (`http:/…`) would land here
    output = FILE_OUTPUTS[name]
    places = _places(tmp_path)
    out_dir = tmp_path / "m"
    out = (
        URL
        if kind == "url"
        else str((out_dir if "{dir}" in output.args else tmp_path) / output.out)
    )
    if kind == "result":
        other = COMPARISON if output.other_result == "comparison" else places["a"].read_bytes()
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_bytes(other)
    elif kind != "url":
        _make(kind, Path(out), tmp_path)
    args = output.as_input if kind == "input" else output.args
    assert args is not None
    if kind == "result":
        args = [*args, *output.force]  # asked to replace, and still refused
    fields = {"out": out, "dir": out_dir, **places}
    _refused([arg.format(**fields) for arg in args], EXPECTED[kind], tmp_path)


FOLDER_CASES = [(name, kind) for name in FOLDER_OUTPUTS for kind in FOLDER_KINDS]


@pytest.mark.parametrize(("name", "kind"), FOLDER_CASES)
def test_every_folder_output_is_checked_before_work(
    name: str, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder output that is a device, a FIFO, a file or a URL: one line, nothing made."""
    monkeypatch.chdir(tmp_path)
    _, args = FOLDER_OUTPUTS[name]
    places = _places(tmp_path)
    out = tmp_path / "out"
    if kind != "url":
        _make(kind, out, tmp_path)
    what = {"device": "a device", "fifo": "a FIFO", "file": "a file"}.get(kind)
    expected = f"is {what}, not a folder" if what else EXPECTED["url"]
    if kind == "dangling":
        expected = "is a symbolic link to nothing"
    fields = {"out": URL if kind == "url" else out, **places}
    _refused([arg.format(**fields) for arg in args], expected, tmp_path)


def _path_parameters() -> set[tuple[str, str]]:
    """Every parameter of every command that takes a path, or whose name says it is where
    something is written (out, log, file, dir, csv, plan), found by walking the app."""
    found: set[tuple[str, str]] = set()

    def walk(command: Any, words: list[str]) -> None:
        if hasattr(command, "commands"):
            for word, sub in command.commands.items():
                walk(sub, [*words, word])
            return
        hints = typing.get_type_hints(command.callback)
        for param in command.params:
            hint = str(hints.get(param.name, ""))
            named = re.search(r"(^|_)(out|log|file|dir|csv|plan)($|_)", param.name or "")
            if "Path" in hint or (named and "bool" not in hint):
                found.add((" ".join(words), param.name))

    walk(typer.main.get_command(APP), [])
    return found


def test_every_path_parameter_is_in_the_table() -> None:
    """A new command (or option) that writes a file cannot be forgotten: every path parameter
    is an output in the tables above or a known input."""
    outputs = {output.param for output in FILE_OUTPUTS.values()}
    outputs |= {param for param, _ in FOLDER_OUTPUTS.values()}
    unknown = _path_parameters() - outputs - INPUTS
    assert not unknown, f"add these to FILE_OUTPUTS, FOLDER_OUTPUTS or INPUTS: {sorted(unknown)}"
    assert outputs | INPUTS <= _path_parameters() | {("report", "run_dirs")}


def test_an_existing_result_is_replaced_only_when_asked(tmp_path: Path) -> None:
    """--force replaces a file of the same kind (a measurement by a measurement), and nothing
    is made by a refused command; measure twice into one folder is refused without it."""
    from sagemeter.atomic import check_output_file
    from sagemeter.filekinds import LOAD, MEASURE, SHARD

    result = tmp_path / "measure-x.json"
    shutil.copyfile(reference_file("measure-gemma-4-e2b.json"), result)
    with pytest.raises(UserError, match="already exists; use --force"):
        check_output_file(result, "the result file", force=False, kind=MEASURE)
    assert check_output_file(result, "the result file", force=True, kind=MEASURE) == result
    with pytest.raises(UserError, match="holds a measure result, never replaced by this output"):
        check_output_file(result, "--csv", force=True)
    shard = tmp_path / "shard-0.json"  # `load --shard 0/2 --out shard-0.json --force` again
    shard.write_text(json.dumps({"kind": "sagemeter.load/1", "shard": {"index": 0, "count": 2}}))
    assert check_output_file(shard, "--out", force=True, kind=SHARD) == shard
    with pytest.raises(UserError, match="holds a load shard, never replaced by a load result"):
        check_output_file(shard, "--out", force=True, kind=LOAD)


def test_a_shard_is_never_replaced_by_the_merge(tmp_path: Path) -> None:
    """`combine shard-0.json shard-1.json shard-2.json --force` (OUT left out): shard 0 stays."""
    shard = {"kind": "sagemeter.load/1", "shard": {"index": 0, "count": 3}}
    files = [tmp_path / f"shard-{i}.json" for i in range(3)]
    for path in files:
        path.write_text(json.dumps(shard))
    before = _tree(tmp_path)
    done = CliRunner().invoke(APP, ["combine", *map(str, files), "--force"])
    assert isinstance(done.exception, UserError)
    assert "holds a load shard, never replaced by a load result" in str(done.exception)
    assert _tree(tmp_path) == before


def test_a_streamed_log_never_follows_a_link_or_blocks_on_a_fifo(tmp_path: Path) -> None:
    """Engine, install and arrival logs are written while a server runs (not atomically): they
    open through `open_output`, which empties only a regular file."""
    from sagemeter.atomic import open_output

    target = tmp_path / "precious.json"
    target.write_bytes(KEEP)
    link, fifo = tmp_path / "link.log", tmp_path / "fifo.log"
    link.symlink_to(target)
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="is a symbolic link"):
        open_output(link, "the engine log")
    with pytest.raises(UserError, match="is a FIFO"):
        open_output(fifo, "the engine log")
    assert target.read_bytes() == KEEP
    old = tmp_path / "old.log"
    old.write_bytes(b"an earlier start\n")
    with open_output(old, "the engine log") as log:
        log.write(b"this start\n")
    assert old.read_bytes() == b"this start\n"


def test_force_replaces_an_existing_file_only(tmp_path: Path) -> None:
    a, b = (reference_file(f"measure-gemma-4-e2b{s}.json") for s in ("", "-qat"))
    out = tmp_path / "compare.json"
    out.write_bytes(KEEP)
    done = CliRunner().invoke(APP, ["combine", str(out), str(a), str(b), "--force"])
    assert done.exit_code == 0, done.output
    assert b'"rows"' in out.read_bytes()


def _sagemeter(*args: str) -> subprocess.CompletedProcess[str]:
    return cli_run.invoke(args)


def test_combine_without_out_is_refused_even_with_force(tmp_path: Path) -> None:
    """`sagemeter combine A.json B.json A2.json`: A is a result, never turned into a comparison."""
    files = [tmp_path / name for name in ("a.json", "b.json", "a2.json")]
    source = reference_file("measure-gemma-4-e2b.json")
    for path in files:
        shutil.copyfile(source, path)
    before = files[0].read_bytes()
    done = _sagemeter("combine", *map(str, files), "--force")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "holds a measure result, never replaced by a comparison" in lines[0]
    assert files[0].read_bytes() == before


def test_load_into_a_device_is_one_line_and_the_device_stays(tmp_path: Path) -> None:
    done = _sagemeter("load", NOTHING, "--out", "/dev/null")
    assert done.returncode == 2
    expected = "error: --out /dev/null: is a device, not a regular file; give a file name"
    assert done.stderr.strip() == expected
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_the_last_write_refuses_a_device_too(tmp_path: Path) -> None:
    """A path no face checked (or one swapped after the check) is still never replaced."""
    from sagemeter.atomic import write_text_atomic

    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "target.json")
    with pytest.raises(UserError, match="symbolic link"):
        write_text_atomic(link, "{}")
    assert link.is_symlink() and not (tmp_path / "target.json").exists()


# The MCP face: every tool that writes a file, the arguments that write `{name}`, the file, and
# whether it takes `force`. Every other tool writes no file a caller names (the tool test).
MCP_OUTPUTS: dict[str, tuple[dict[str, Any], str, bool]] = {
    "measure_endpoint": ({"target": NOTHING, "name": "x"}, "measure-x.json", False),
    "compare_results": (
        {"results": ["gemma-4-e2b", "gemma-4-e2b-qat"], "name": "x"},
        "compare-x.json",
        True,
    ),
    "find_operating_point": (
        {"target": NOTHING, "name": "x", "slo_ttft_ms": 500},
        "load-x.json",
        False,
    ),
}
# Why each other tool is not in the table: it writes nothing, or only where no caller names.
MCP_NO_NAMED_OUTPUT = {
    "run_experiment": "a new run folder runs/DATE-NAME it picks itself (default_run_dir)",
    "start_local": "its engine log, opened through open_output (tested above)",
    "stop_local": "writes nothing",
    "list_checkpoints": "reads",
    "inspect_checkpoint": "reads",
    "check_quota": "reads",
    "get_price": "reads (the price cache is the state folder's)",
    "endpoint_status": "reads",
    "list_endpoints": "reads",
    "endpoint_logs": "reads",
    "invoke_endpoint": "reads",
    "deploy_endpoint": "the cloud, and the state folder's ledger",
    "delete_endpoint": "the cloud, and the state folder's ledger",
}
MCP_KINDS = ("device", "fifo", "symlink", "folder", "existing", "result")


@pytest.mark.parametrize("kind", MCP_KINDS)
@pytest.mark.parametrize("tool", MCP_OUTPUTS)
async def test_mcp_tools_keep_the_same_rule(tool: str, kind: str, tmp_path: Path) -> None:
    """The MCP face: each bad kind of output at the name a tool writes is one refusal before
    any work (nothing listens at the target: a late check would say so), the thing unchanged."""
    from mcp import Client

    from sagemeter.mcp import ServerConfig, build_server
    from tests.mcp_helpers import error_line

    results = tmp_path / "results"
    results.mkdir()
    for suffix in ("", "-qat"):
        name = f"measure-gemma-4-e2b{suffix}.json"
        shutil.copyfile(reference_file(name), results / name)
    arguments, file_name, takes_force = MCP_OUTPUTS[tool]
    out = results / file_name
    if kind == "result":
        other = COMPARISON if file_name.startswith("measure-") else KEEP
        source = reference_file("measure-gemma-4-e2b.json")
        out.write_bytes(other if other is COMPARISON else source.read_bytes())
        arguments = {**arguments, "force": True} if takes_force else arguments
    else:
        _make(kind, out, tmp_path)
    before = _tree(tmp_path)
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        line = error_line(await client.call_tool(tool, arguments))
    expected = EXPECTED[kind]
    if kind == "existing" or (kind == "result" and not takes_force):
        expected = "already exists; " if kind == "existing" else "holds a "
    assert expected in line, line
    assert _tree(tmp_path) == before


async def test_every_mcp_tool_is_classified(tmp_path: Path) -> None:
    """A new tool that writes a file cannot be forgotten: it joins MCP_OUTPUTS or says why not."""
    from mcp import Client

    from sagemeter.mcp import ServerConfig, build_server

    async with Client(build_server(ServerConfig(results_dir=tmp_path))) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
    assert tools == set(MCP_OUTPUTS) | set(MCP_NO_NAMED_OUTPUT)


def test_a_benchmark_checks_its_output_before_running(tmp_path: Path) -> None:
    """The benchmarks that write a file follow the same rule, before minutes of runs."""
    from benchmarks import load_side_by_side

    existing = tmp_path / "side-by-side.json"
    existing.write_bytes(KEEP)
    before = _tree(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        load_side_by_side.main(["--json", str(existing), "--seconds", "600"])
    assert stopped.value.code == 2
    assert _tree(tmp_path) == before


@pytest.mark.timeout(60)  # a FIFO read would block
@pytest.mark.parametrize("kind", ["device", "fifo", "symlink", "folder", "result"])
@pytest.mark.parametrize("file_name", ["measure-b.json", "journal.json", "engine-a.log"])
def test_a_resumed_run_checks_every_file_it_writes(
    file_name: str, kind: str, tmp_path: Path
) -> None:
    """`run --resume`: each file the run writes in its folder is checked before a step runs
    (a SageMaker arm would be deployed first, and bill)."""
    from sagemeter.experiment import parse_plan
    from sagemeter.experiment.runner import start_run

    run_dir = tmp_path / "run"
    plan = PLAN.format(t=NOTHING)
    start_run(parse_plan(plan, "plan"), out=run_dir, plan_text=plan, plan_source="plan")
    out = run_dir / file_name
    if file_name == "journal.json":
        (tmp_path / "journal-kept.json").write_bytes(out.read_bytes())
        out.unlink()
    if kind == "result":
        out.write_bytes(COMPARISON if file_name != "journal.json" else KEEP)
    else:
        _make(kind, out, tmp_path)
    expected = EXPECTED[kind] if kind != "result" else "holds a comparison, never replaced"
    if file_name == "measure-b.json" and kind in ("result", "folder"):  # the journal's check
        expected = "not written by this run" if kind == "result" else "is a folder"
    if file_name == "journal.json" and kind in ("folder", "result"):  # read first: its reader
        expected = "is a folder" if kind == "folder" else "not a sagemeter run journal"
    _refused(["run", "--resume", str(run_dir)], expected, tmp_path)
