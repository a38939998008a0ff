"""The command line: the app, every command group registered on it, and the one entry point.

Each command group lives in its own module of this package with a `register(app)`; a face parses,
calls one library function, and renders. `main` turns errors into one line and an exit code.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import typer
import typer.main
from typer.models import CommandInfo, TyperInfo

from sagemeter.cli.common import err_console
from sagemeter.errors import UserError, exit_code

app = typer.Typer(
    name="sagemeter",
    help="Deploy, measure, compare and tear down LLM checkpoints.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _group() -> None:
    # A group even when a lean command registers only its own module (typer would otherwise run
    # a lone command as the whole program and take its name for an argument).
    pass


# Every command, in the order `sagemeter --help` lists them, and the module that registers it
# (each has `register(app)`). A command run by name registers only its own module, so `sagemeter
# load` does not import boto3 and `sagemeter questions` does not import scipy: a command's start-up
# time is part of what load measures, and every command's is part of what a user waits for.
COMMANDS = {
    "checkpoints": "sagemeter.cli.engine",
    "serve": "sagemeter.cli.engine",
    "measure": "sagemeter.cli.measure",
    "combine": "sagemeter.cli.combine",
    "demo": "sagemeter.cli.run",
    "run": "sagemeter.cli.run",
    "report": "sagemeter.cli.report",
    "inspect": "sagemeter.cli.inspect",
    "load": "sagemeter.cli.load",
    "selfcheck": "sagemeter.cli.load",
    "calibrate-server": "sagemeter.cli.calibrate",
    "questions": "sagemeter.cli.questions",
    "fidelity": "sagemeter.cli.fidelity",
    "engines": "sagemeter.cli.engines",
    "mcp": "sagemeter.cli.mcp",
    "sagemaker": "sagemeter.cli.sagemaker",
}
COMMAND_MODULES = tuple(dict.fromkeys(COMMANDS.values()))


def _register_optional_commands(argv: list[str] | None = None) -> None:
    """Add the commands of every feature module that is present in this install; when `argv`
    names a known command, only the module that command needs (help and an unknown command get
    them all, so the list and click's suggestions are whole)."""
    words = sys.argv[1:] if argv is None else argv
    named = COMMANDS.get(words[0]) if words else None
    for module_name in (named,) if named else COMMAND_MODULES:
        infos = _module_commands(module_name)
        if infos is None:
            continue
        commands, groups = infos
        app.registered_commands += [c for c in commands if c not in app.registered_commands]
        app.registered_groups += [g for g in groups if g not in app.registered_groups]


# Each module's commands, made once per process: a process that runs several commands (an
# embedding program, the tests) adds the same ones again rather than new copies, so the click
# command built from them can be kept (`built_command`).
_made: dict[str, tuple[list[CommandInfo], list[TyperInfo]]] = {}


def _module_commands(module_name: str) -> tuple[list[CommandInfo], list[TyperInfo]] | None:
    """The commands and groups `module_name` registers (None: the module is not installed)."""
    import importlib

    if module_name not in _made:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            return None
        scratch = typer.Typer()
        module.register(scratch)
        _made[module_name] = (scratch.registered_commands, scratch.registered_groups)
    return _made[module_name]


# typer builds its click command from an app's commands on every call (0.07 CPU-s with every
# command): kept here per app and set of commands, since a command list is made once (`_made`).
_built: dict[tuple[object, ...], Callable[..., Any]] = {}
MAX_BUILT = 64


def built_command(typer_app: typer.Typer) -> Callable[..., Any]:
    """`typer.main.get_command(typer_app)`, kept while the app holds the same commands."""
    key = (
        typer_app,
        typer_app.registered_callback,
        *typer_app.registered_commands,
        *typer_app.registered_groups,
    )
    if key not in _built:
        if len(_built) >= MAX_BUILT:
            _built.clear()
        _built[key] = typer.main.get_command(typer_app)
    return _built[key]


def _redact_output() -> None:
    """Everything this process prints passes through the one redaction (sagemeter.redaction)."""
    from sagemeter.cli.terminal import SurvivingStream
    from sagemeter.redaction import RedactingStream

    done = (RedactingStream, SurvivingStream)  # SurvivingStream wraps a RedactingStream
    if not isinstance(sys.stdout, done):
        sys.stdout = RedactingStream(sys.stdout)
    if not isinstance(sys.stderr, done):
        sys.stderr = RedactingStream(sys.stderr)


INTERRUPTED = 130  # the shell's code for a command ended by Ctrl-C (128 + SIGINT)
_received: list[int] = []  # SIGTERM / SIGHUP taken for a Ctrl-C, so the exit code tells which


def _like_ctrl_c(signum: int, frame: FrameType | None) -> None:
    """SIGTERM (a supervisor, `kill`) and SIGHUP (a closed terminal or SSH session) take the
    Ctrl-C path: whatever SIGINT would do now (asyncio's cancel, KeyboardInterrupt) cleans up
    the same way, then the exit code is 128 + the signal's number."""
    _received.append(signum)
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:
        raise KeyboardInterrupt


def _handle_stop_signals() -> None:
    """Route SIGTERM and SIGHUP through `_like_ctrl_c` (only the main thread may)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for each in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(each, _like_ctrl_c)


def _interrupted_code() -> int:
    """130 for Ctrl-C; 143 for SIGTERM, 129 for SIGHUP."""
    return 128 + _received[0] if _received else INTERRUPTED


def _say_interrupted(message: str) -> None:
    """The one line; a hung-up terminal may refuse it, which must not become a traceback."""
    with contextlib.suppress(OSError, ValueError):
        err_console.print(message, highlight=False, markup=False)


def _run(argv: list[str] | None) -> object:
    """The command `argv` names, registered and run (a module that fails to import is inside
    the guard too)."""
    _register_optional_commands(argv)
    return built_command(app)(args=argv, standalone_mode=False)


def _usage_line(exc: Exception) -> str:
    """click's message for a usage error, on one line, with the help command to run."""
    format_message = getattr(exc, "format_message", None)
    message = format_message() if callable(format_message) else str(exc)
    context = getattr(exc, "ctx", None)
    path = getattr(context, "command_path", None) or "sagemeter"
    return f"error: {' '.join(str(message).split())} (see `{path} --help`)"


def _os_error_line(exc: OSError) -> str:
    """An OSError no command turned into a UserError (the disk filled or a write was refused
    after the upfront checks): `error: what: reason (file)`, one line."""
    from sagemeter.atomic import describe_write_error

    notes = getattr(exc, "__notes__", None) or ["system error"]
    where = f" ({exc.filename})" if exc.filename else ""
    return f"error: {notes[-1]}: {describe_write_error(exc)}{where}"


DEBUG_VARIABLE = "SAGEMETER_DEBUG"  # set to 1: an unexpected error shows its traceback
UNEXPECTED = 1  # a failure that is no kind in sagemeter.errors: a bug, not the user's input


def sagemeter_error_in(exc: BaseException) -> UserError | None:
    """The sagemeter error `exc` is, or the first one an exception group (a task group's)
    holds, so a failure raised inside concurrent work keeps its own line and exit code."""
    if isinstance(exc, UserError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := sagemeter_error_in(inner)) is not None:
                return found
    return None


def _holds(exc: BaseException, kind: type[BaseException]) -> bool:
    """`exc` is a `kind`, or an exception group holding one at any depth."""
    if isinstance(exc, kind):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return any(_holds(inner, kind) for inner in exc.exceptions)
    return False


def unexpected_line(exc: BaseException) -> str:
    """One line for an exception no command turned into a sagemeter error: what it was, and
    how to see the traceback and report it (never the traceback itself by default)."""
    what = " ".join(str(exc).split())[:300]
    kind = type(exc).__name__
    return (
        f"error: unexpected {kind}{': ' + what if what else ''}; this is a sagemeter bug: run "
        f"again with {DEBUG_VARIABLE}=1 for the traceback and report it"
    )


def main(argv: list[str] | None = None) -> None:
    """Entry point: a sagemeter error → one line on stderr and its kind's exit code
    (`errors.exit_code`: 2 bad input, 4 the cloud, 5 an engine, 6 the endpoint unreachable);
    Ctrl-C → what was interrupted and what was kept, exit 130 (SIGTERM and SIGHUP the same,
    exit 143 and 129). Usage errors (unknown command, missing argument) are click's own short
    messages, exit 2; a command may exit 3 (an incomplete measurement); an OSError left over (a
    full disk at the last write) is one line and exit 1, and so is anything else unexpected
    (a bug): one line saying how to see its traceback (`SAGEMETER_DEBUG=1`)."""
    from sagemeter.cli.interrupt import interrupted_message
    from sagemeter.cli.terminal import keep_writing
    from sagemeter.printable import printable

    _redact_output()
    keep_writing()  # a closed terminal (SIGHUP) must not stop the cleanup at its first line
    _handle_stop_signals()
    try:
        code = _run(argv)
    except UserError as exc:
        # No markup: a message may quote brackets (`pip install 'sagemeter[ray]'`) rich would eat.
        line = f"error: {printable(str(exc), keep_newlines=True)}"  # may quote a file or server
        err_console.print(line, style="red", highlight=False, markup=False)
        sys.exit(exit_code(exc))
    except (typer.Abort, KeyboardInterrupt):
        _say_interrupted(interrupted_message())
        sys.exit(_interrupted_code())
    except typer.TyperException as exc:  # a usage error: the same one line, and where to look
        err_console.print(printable(_usage_line(exc)), style="red", highlight=False, markup=False)
        sys.exit(getattr(exc, "exit_code", 2))
    except OSError as exc:  # not bad input but the machine: exit 1
        err_console.print(
            printable(_os_error_line(exc)), style="red", highlight=False, markup=False
        )
        sys.exit(1)
    except SystemExit:
        raise
    except BaseException as exc:  # the last guard: one line, never a traceback unless asked
        if (found := sagemeter_error_in(exc)) is not None:
            line = f"error: {printable(str(found), keep_newlines=True)}"
            err_console.print(line, style="red", highlight=False, markup=False)
            sys.exit(exit_code(found))
        if _holds(exc, KeyboardInterrupt):  # Ctrl-C inside concurrent work: still Ctrl-C
            _say_interrupted(interrupted_message())
            sys.exit(_interrupted_code())
        if os.environ.get(DEBUG_VARIABLE, "") not in ("", "0"):
            raise
        err_console.print(
            printable(unexpected_line(exc)), style="red", highlight=False, markup=False
        )
        sys.exit(UNEXPECTED)
    code = code if isinstance(code, int) else 0
    if code == INTERRUPTED:  # typer turns Ctrl-C into this exit code before we see it
        _say_interrupted(interrupted_message())
        code = _interrupted_code()
    elif _received and code == 0:  # `serve` and `mcp` end on a stop signal as on Ctrl-C: said
        code = _interrupted_code()  # "stopped"; the code still tells SIGTERM and SIGHUP apart
    sys.exit(_unless_output_lost(code))


def _unless_output_lost(code: int) -> int:
    """`code`, unless the command succeeded but its output on stdout never arrived (the reader
    went away): then that is said on stderr and the exit is 1, as for any file not written."""
    from sagemeter.cli.terminal import stdout_lost

    lost = stdout_lost()
    if code != 0 or lost is None:
        return code
    _say_interrupted(f"error: could not write the output: {lost} (stdout)")
    return 1
