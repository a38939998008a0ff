"""Running `sagemeter ARGS` from a test, one way or the other, both answering a CompletedProcess.

`invoke` runs the real entry point (`sagemeter.cli.main`: the same error lines, exit codes and
redaction as the installed command) in this process through click's CliRunner isolation: no new
interpreter to start (about 0.6 s of CPU each), which is most of what a CLI test costs. Use it when
a test checks what the command prints, its exit code or the files it writes.

`run` starts the real `python -m sagemeter` process. Use it when the test is about the process:
signals and Ctrl-C, what reaches a real terminal or pipe, that nothing is left running, what a
child process's environment holds, plug-ins found on a PYTHONPATH, servers started as children.
`command` is the same argv for tests that drive a `Popen` themselves.

`env` is the command's whole environment, as for a subprocess (None: this process's own):
`invoke` makes os.environ exactly that for the call and puts it back after.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from typer.testing import CliRunner

from tests.busy_host import client_limits_named

cli = importlib.import_module("sagemeter.cli.app")  # the module (the package names its app)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
THREAD_GRACE_SECONDS = 5.0  # how long a command's own threads may take to end after it returns


class Completed(subprocess.CompletedProcess[str]):
    """A command's outcome whose repr (what a failed `assert done.returncode == 0` shows) names
    the client rules its output gave as reasons: such a failure is this busy host's, and the
    suite runs it again (pyproject.toml's `only_rerun`). The whole output would be cut short."""

    def __repr__(self) -> str:
        named = client_limits_named(f"{self.stdout}{self.stderr}")
        last = next((line for line in reversed(self.stderr.splitlines()) if line.strip()), "")
        said = [", ".join(named)] if named else []
        said += [repr(last[:160])] if last else []
        return f"<sagemeter exit {self.returncode}{': ' + '; '.join(said) if said else ''}>"


def command(*args: str | os.PathLike[str]) -> list[str]:
    """The argv of the real `sagemeter ARGS` process (for a test's own Popen)."""
    return [sys.executable, "-m", "sagemeter", *map(str, args)]


def run(
    args: Sequence[str | os.PathLike[str]],
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    *,
    timeout: float = 120,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`sagemeter ARGS` as a real process: exit code, stdout and stderr."""
    done = subprocess.run(
        command(*args),
        capture_output=True,
        text=True,
        env=None if env is None else dict(env),
        cwd=cwd,
        timeout=timeout,
        input=input,
        check=False,
    )
    return Completed(done.args, done.returncode, done.stdout, done.stderr)


def invoke(
    args: Sequence[str | os.PathLike[str]],
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    *,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`sagemeter ARGS` through the real entry point in this process: exit code, stdout and
    stderr as the process would give them. Whatever the call changes in this process (the app's
    registered commands, signal handlers, os.environ, the working folder) is put back, and a
    thread the command started that is still running after it returned fails the test (a
    server it did not stop)."""
    argv = [str(each) for each in args]
    runner = CliRunner()
    before = set(threading.enumerate())
    with (
        _restored_process_state(),
        _working_folder(cwd),
        runner.isolation(input=input, env=_overrides(env)) as (out, err, _mixed),
        _consoles_as_a_new_process_makes_them(),
    ):
        code = _exit_code_of(argv)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        stdout = out.getvalue().decode(runner.charset, "replace")
        stderr = err.getvalue().decode(runner.charset, "backslashreplace")
    _assert_no_thread_left(before, argv)
    return Completed(command(*argv), code, stdout, stderr)


def _exit_code_of(argv: list[str]) -> int:
    """main's exit code (it always ends in sys.exit), as the shell would see it."""
    try:
        cli.main(argv)
    except SystemExit as ended:
        code = ended.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)  # sys.exit("text"): Python prints it and exits 1
        return 1
    return 0


def _overrides(env: Mapping[str, str] | None) -> dict[str, str | None] | None:
    """CliRunner's overrides that make os.environ exactly `env` (None for a variable to drop)."""
    if env is None:
        return None
    return {**dict.fromkeys(os.environ), **env}


@contextlib.contextmanager
def _restored_process_state() -> Iterator[None]:
    """The app's command list, the stop-signal handlers and what main remembers of signals, as
    they were: main registers the command's module on the one app and routes SIGTERM and SIGHUP
    for its own process, which here is pytest's."""
    commands = list(cli.app.registered_commands)
    groups = list(cli.app.registered_groups)
    handlers = {each: signal.getsignal(each) for each in STOP_SIGNALS}
    received = list(cli._received)
    try:
        yield
    finally:
        cli.app.registered_commands[:] = commands
        cli.app.registered_groups[:] = groups
        for each, handler in handlers.items():
            signal.signal(each, handler)
        cli._received[:] = received


# What a rich Console reads from the environment and its stream once, when it is made (width
# from COLUMNS, colours from NO_COLOR / FORCE_COLOR and whether the stream is a terminal).
CONSOLE_SETTINGS = (
    "_width",
    "_height",
    "_color_system",
    "_force_terminal",
    "no_color",
    "is_interactive",
)


@contextlib.contextmanager
def _consoles_as_a_new_process_makes_them() -> Iterator[None]:
    """The CLI's two consoles were made when this process imported them, from pytest's
    environment and streams: for the call they take the settings a console made now (from the
    command's env and the captured streams) would have, as in a fresh process; then their own."""
    from sagemeter.cli.common import console, err_console

    saved = [(each, dict(vars(each))) for each in (console, err_console)]
    try:
        for each in (console, err_console):
            fresh = type(each)(stderr=each.stderr)
            for name in CONSOLE_SETTINGS:
                setattr(each, name, getattr(fresh, name))
        yield
    finally:
        for each, state in saved:
            vars(each).clear()
            vars(each).update(state)


@contextlib.contextmanager
def _working_folder(cwd: Path | str | None) -> Iterator[None]:
    if cwd is None:
        yield
        return
    with contextlib.chdir(cwd):
        yield


def _assert_no_thread_left(before: set[threading.Thread], argv: list[str]) -> None:
    deadline = time.monotonic() + THREAD_GRACE_SECONDS
    while True:
        left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert not left, f"`sagemeter {' '.join(argv)}` left threads running: {left}"
