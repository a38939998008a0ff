"""The exceptions a person sees: a message they can act on, never a traceback.

One tree under `SagemeterError`, one class per kind of failure, each carrying its exit code, so
a script can tell bad input from a cloud, engine or network failure without reading the text:

    SagemeterError (alias UserError)   exit 2 unless a subclass says otherwise
    ├── InputError      bad input or an unmet precondition, checked before work    exit 2
    │   ├── ManyProblems  several problems of one input at once                   exit 2
    │   └── SettingsError settings that do not go together, named for each face  exit 2
    ├── PlatformError   the cloud refused or failed (AWS errors, quota, capacity)  exit 4
    ├── EngineError     a server sagemeter starts could not start or died          exit 5
    └── TransportError  the endpoint could not be reached, so nothing was measured exit 6

`exit_code` is the one place the faces turn an exception into an exit code.
"""

from __future__ import annotations

import re


class SagemeterError(Exception):
    """A failure a person can act on; the faces print its message on one line. Raised as is
    (mostly under its old name `UserError`) it is bad input: exit 2."""

    exit_code = 2


UserError = SagemeterError
"""The root's first name, kept so every `raise UserError` stays input and every
`except UserError` still catches the whole tree."""


class InputError(SagemeterError):
    """Bad input or an unmet precondition, found before any work started."""

    exit_code = 2


class PlatformError(SagemeterError):
    """The cloud refused or failed: an AWS error, a quota, no capacity, a wait that never ended."""

    exit_code = 4


class EngineError(SagemeterError):
    """A server sagemeter starts on this machine could not start, or died while it ran."""

    exit_code = 5


class TransportError(SagemeterError):
    """The endpoint could not be reached at all, so nothing could be measured."""

    exit_code = 6


EXIT_INCOMPLETE = 3
"""Not an error but a job that did not give all it was asked for: a measurement, load, run,
comparison or report with a figure missing (the files are written and say why). Every command
uses this code for it; a failed job never exits 0."""

KINDS: tuple[type[SagemeterError], ...] = (InputError, PlatformError, EngineError, TransportError)


def exit_code(exc: BaseException) -> int:
    """The exit code for `exc`: its class's in the tree, 1 for anything else."""
    if isinstance(exc, SagemeterError):
        return exc.exit_code
    return 1


def reworded(exc: SagemeterError, message: str) -> SagemeterError:
    """A new error saying `message`, of the same kind as `exc` (for a message that adds context),
    so wrapping never turns an engine or cloud failure back into bad input."""
    for kind in KINDS:
        if isinstance(exc, kind):
            return kind(message)
    return SagemeterError(message)


class ManyProblems(InputError):
    """Several problems of one input found at once (a plan's), so all are fixed in one go: the
    terminal shows one line each, an MCP answer one sentence (`sentence`)."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        if len(problems) == 1:
            text = f"{source}: {problems[0]}"
        else:
            lines = "\n".join(f"  {problem}" for problem in problems)
            text = f"{source}: {len(problems)} problems, one a line:\n{lines}"
        super().__init__(text)

    def sentence(self) -> str:
        """Every problem on one line, for faces that answer in one sentence."""
        if len(self.problems) == 1:
            return str(self)
        return f"{self.source}: {len(self.problems)} problems: " + "; ".join(self.problems)


SETTING_NAME = re.compile(r"\{(\w+)\}")
"""A setting named in a message as `{field}`, for the face that took it to spell."""


class SettingsError(InputError):
    """Settings that do not go together (`{search} rate starts at {rate}`), each named by its
    field in braces, so every face spells it its own way: `--rate` on the command line,
    `start_rate` over MCP (`sagemeter.options.command.Command.spelling`). Said as is, each name
    is its field's own (`rate`)."""

    def __init__(self, template: str) -> None:
        self.template = template
        super().__init__(SETTING_NAME.sub(r"\1", template))
