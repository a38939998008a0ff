"""Every output of every command and face obeys one rule (`atomic.check_output_file`): a new name
or a regular file, never a device, FIFO or symlink, never one of the command's inputs, and an
existing file only with --force. Each refusal is one line, before any work, the file untouched.

The commands run in-process through click (a subprocess per case would cost a second each); a
few cases go through the real `sagemeter` command for the exit code and the one line.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from sagemeter.errors import UserError
from tests.conftest import reference_file

NOTHING = (
    "http://127.0.0.1:9"  # nothing listens: a check that came late shows as a connection error
)
KEEP = b'{"note": "keep me"}\n'

# command -> (arguments with {out} where the output goes, arguments whose output is an input)
COMMANDS: dict[str, tuple[list[str], list[str] | None]] = {
    "combine": (["combine", "{out}", "{a}", "{b}"], ["combine", "{a}", "{a}", "{b}"]),
    "load": (["load", NOTHING, "--out", "{out}"], None),
    "selfcheck": (["selfcheck", "--out", "{out}"], None),
    "fidelity collect": (
        ["fidelity", "collect", "{out}", NOTHING],
        ["fidelity", "collect", "{a}", NOTHING, "--reference", "{a}"],
    ),
    "fidelity compare": (
        ["fidelity", "compare", "{a}", "{b}", "--out", "{out}"],
        ["fidelity", "compare", "{a}", "{b}", "--out", "{b}"],
    ),
    "measure": (
        ["measure", "{out_dir}", NOTHING, "--name", "x"],
        ["measure", "{out_dir}", NOTHING, "--name", "x", "--fidelity-reference", "{out}"],
    ),
}
KINDS = ("device", "fifo", "symlink", "existing", "input")
EXPECTED = {
    "device": "is a device, not a regular file",
    "fifo": "is a FIFO, not a regular file",
    "symlink": "is a symbolic link",
    "existing": "already exists; use --force",
    "input": "is also one of this command's inputs",
}


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
    else:
        out.write_bytes(KEEP)


def _state(path: Path) -> tuple[int, bytes | None]:
    mode = path.lstat().st_mode
    return mode, path.read_bytes() if stat.S_ISREG(mode) else None


# Every command with every kind of output in the way; "input" only where the command reads a file.
CASES = [
    (command, kind)
    for command, (_, as_input) in COMMANDS.items()
    for kind in KINDS
    if kind != "input" or as_input is not None
]


@pytest.mark.parametrize(("command", "kind"), CASES)
def test_every_output_is_checked_before_work(command: str, kind: str, tmp_path: Path) -> None:
    normal, as_input = COMMANDS[command]
    out_dir = tmp_path / "m"
    out_dir.mkdir()
    out = out_dir / "measure-x.json"
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_bytes(KEEP)
    b.write_bytes(KEEP)
    _make("existing" if kind == "input" else kind, out, tmp_path)
    if kind == "input" and command != "measure":
        out = b if command == "fidelity compare" else a
    args = as_input if kind == "input" else normal
    fields = {"out": out, "out_dir": out_dir, "a": a, "b": b}
    before = {path: _state(path) for path in (out, a, b)}
    assert args is not None
    done = CliRunner().invoke(APP, [arg.format(**fields) for arg in args])
    assert isinstance(done.exception, UserError), done.output
    message = str(done.exception)
    assert EXPECTED[kind] in message
    assert "\n" not in message
    assert {path: _state(path) for path in (out, a, b)} == before


def test_force_replaces_an_existing_file_only(tmp_path: Path) -> None:
    a, b = (reference_file(f"measure-gemma-4-e2b{s}.json") for s in ("", "-qat"))
    out = tmp_path / "compare.json"
    out.write_bytes(KEEP)
    done = CliRunner().invoke(APP, ["combine", str(out), str(a), str(b), "--force"])
    assert done.exit_code == 0, done.output
    assert b'"rows"' in out.read_bytes()


def _sagemeter(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagemeter", *args], capture_output=True, text=True, timeout=60
    )


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


async def test_mcp_tools_keep_the_same_rule(tmp_path: Path) -> None:
    """The MCP face: a second comparison of one name is refused unless `force`; a result name
    whose file is a symlink is refused before anything is measured."""
    from mcp import Client

    from sagemeter.mcp import ServerConfig, build_server
    from tests.mcp_helpers import error_line, ok

    results = tmp_path / "results"
    results.mkdir()
    for suffix in ("", "-qat"):
        name = f"measure-gemma-4-e2b{suffix}.json"
        shutil.copyfile(reference_file(name), results / name)
    (results / "measure-linked.json").symlink_to(tmp_path / "elsewhere.json")
    asked = {"results": ["gemma-4-e2b", "gemma-4-e2b-qat"], "name": "ab"}
    async with Client(build_server(ServerConfig(results_dir=results))) as client:
        ok(await client.call_tool("compare_results", asked))
        written = (results / "compare-ab.json").read_bytes()
        again = error_line(await client.call_tool("compare_results", asked))
        assert "already exists; pass force=true to replace it" in again
        assert (results / "compare-ab.json").read_bytes() == written
        ok(await client.call_tool("compare_results", {**asked, "force": True}))
        linked = await client.call_tool("measure_endpoint", {"target": NOTHING, "name": "linked"})
    assert "is a symbolic link" in error_line(linked)
    assert (results / "measure-linked.json").is_symlink()
    assert not (tmp_path / "elsewhere.json").exists()


@pytest.mark.parametrize("kind", ["device", "fifo", "existing"])
@pytest.mark.parametrize("command", ["demo", "report --compare"])
def test_folder_outputs_refuse_anything_but_a_folder(
    command: str, kind: str, tmp_path: Path
) -> None:
    """`demo` and `report --compare` write into a folder: a device, FIFO or file there is refused."""
    out = tmp_path / "out"
    _make(kind, out, tmp_path)
    runs = [tmp_path / "run-a", tmp_path / "run-b"]
    for run in runs:
        run.mkdir()
    args = ["demo", "--out", str(out)]
    if command != "demo":
        args = ["report", "--compare", *map(str, runs), "--out", str(out)]
    before = _state(out)
    done = CliRunner().invoke(APP, args)
    assert isinstance(done.exception, UserError), done.output
    what = {"device": "a device", "fifo": "a FIFO", "existing": "a file"}[kind]
    assert f"is {what}, not a folder" in str(done.exception)
    assert _state(out) == before
