"""`run`'s options, declared once: `sagemeter run`'s flags and the MCP tool `run_experiment`'s
arguments are made from these fields (`sagemeter.options.faces`); a plan's own settings are its
tables (`sagemeter.experiment.plan`).

Which plan, and which run folder to continue, are each face's own: the command line takes paths
(`PLAN`, `--out`, `--resume`), MCP TOML text or names in its results folder (`plan`,
`plan_file`, `resume`). The help names `resume` as each face spells it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, ClassVar

from pydantic import Field

from sagemeter.bounds import MAX_COST_USD
from sagemeter.options.base import Face, Opt, OptionsModel
from sagemeter.options.command import Command


class RunOptions(OptionsModel):
    """Whether the run only shows its plan, and the spend cap a resumed run keeps to."""

    TABLE: ClassVar[str] = "run"

    dry_run: Annotated[
        bool,
        Field(
            description="show the steps, what each creates, time and cost (and on the command "
            "line each platform's quota); create nothing"
        ),
        Opt(cli="--dry-run"),  # a flag that only turns it on, as it always was
    ] = False
    max_cost_usd: Annotated[
        float | None,
        Field(
            gt=0,
            le=MAX_COST_USD,
            description="with {resume}: a new spend cap for the whole run",
        ),
        Opt(),
    ] = None


@dataclass(frozen=True)
class FaceOwnNames(Command):
    """A command whose help also names options each face declares itself (`{resume}`: the
    command line's `--resume`, MCP's `resume`), by `own`: name → (command line, MCP)."""

    own: tuple[tuple[str, str, str], ...] = ()

    def label(self, face: Face) -> Callable[[str], str]:
        spelled = super().label(face)
        own = {name: (cli if face == "cli" else mcp) for name, cli, mcp in self.own}
        return lambda field: own.get(field) or spelled(field)


RUN = FaceOwnNames(
    "run",
    models=(RunOptions,),
    own=(("resume", "--resume", "resume"),),
)
