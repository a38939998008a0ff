"""The command table: every command maps to the module that registers it, and a command run by
name imports only what it needs (no boto3 for `load`, no scipy for `questions`, nothing of
SageMaker's for a measurement of an HTTP server)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import typer.main

from sagemeter.cli.app import COMMAND_MODULES, COMMANDS
from tests import cli_run


def registered_names(module_name: str) -> set[str]:
    """The command and group names one module adds to an app."""
    app = typer.Typer()
    importlib.import_module(module_name).register(app)
    commands = {c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands}  # type: ignore[union-attr]
    groups = {g.name or g.typer_instance.info.name for g in app.registered_groups}  # type: ignore[union-attr]
    return commands | groups  # type: ignore[return-value]


def test_every_command_is_in_the_table_with_its_own_module() -> None:
    for module_name in COMMAND_MODULES:
        names = registered_names(module_name)
        assert names == {name for name, module in COMMANDS.items() if module == module_name}


PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('loaded:' + ','.join(m for m in ('boto3', 'scipy', 'ray', "
    "'botocore', 'sagemeter.sagemaker') if m in sys.modules), file=sys.stderr))\n"
    "from sagemeter.cli.app import main\n"
    "main(sys.argv[1:])\n"
)


NO_CLOUD = {"boto3", "botocore", "sagemeter.sagemaker", "scipy", "ray"}
CLOSED = "http://127.0.0.1:9"  # nothing listens: the command runs until it tries to connect


@pytest.mark.parametrize(
    ("args", "absent", "code"),
    [
        (["questions", "list"], {"boto3", "scipy", "ray"}, 0),
        (["load", "--help"], {"boto3", "scipy", "ray"}, 0),
        (["measure", "--help"], {"boto3", "scipy", "ray"}, 0),
        (["combine", "--help"], {"boto3", "ray"}, 0),
        (["load", CLOSED, "--duration", "1s"], NO_CLOUD, 6),
        (["measure", "{tmp}/out", CLOSED, "--quick"], NO_CLOUD, 2),
    ],
)
def test_a_named_command_imports_only_what_it_needs(
    tmp_path: Path, args: list[str], absent: set[str], code: int
) -> None:
    args = [arg.format(tmp=tmp_path) for arg in args]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == code, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("loaded:")
    loaded = set(filter(None, last.removeprefix("loaded:").split(",")))
    assert loaded & absent == set()


def test_help_lists_every_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sagemeter", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    listed = {line.split()[1] for line in done.stdout.splitlines() if line.startswith("│ ")}
    assert set(COMMANDS) <= listed


def test_commands_run_again_in_one_process_are_the_same_commands_built_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An embedding program (or these tests) may call the entry point many times: each module's
    commands are made once, not once per call, so the click command is built once per set of
    commands (typer rebuilds it on every call otherwise: 0.07 CPU-s with every command)."""
    builds = []
    build = typer.main.get_command

    def counted(app: typer.Typer) -> object:
        builds.append(app)
        return build(app)

    monkeypatch.setattr(typer.main, "get_command", counted)
    for _ in range(3):
        for args in (["questions", "list"], ["combine", "--help"]):
            assert cli_run.invoke(args, {**os.environ, "COLUMNS": "200"}).returncode == 0
    assert len(builds) <= 2  # one per command set, at most (an earlier test may have built it)
