"""What a run starts with stays what it runs with: the plan's paths and the files they name.

A plan's relative paths (the questions file, a `local:` or `vllm:` checkpoint path) mean the
plan file's own folder, and are made absolute once, when the run starts, so the journal's plan
names the same files wherever `--resume` is typed. The run folder's `plan.toml` and each input
file the run reads whole (the questions file, a `local:` arm's .gguf) are kept in the journal by
sha256, and so is each result file the run writes; a resume refuses, in one line and before any
work, when one of them changed, or when a result file is there that the run did not write (a
result deleted since is measured again, and the run states the order it was measured in).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from sagemeter.atomic import refuse_special
from sagemeter.errors import UserError
from sagemeter.experiment.journal import PLAN_FILE, FrozenInput, Journal, StepRecord
from sagemeter.experiment.plan import (
    NAMED_CHECKPOINTS,
    Plan,
    anchored_questions,
    anchored_target,
)
from sagemeter.platforms.deployment import parse_utc
from sagemeter.questions import builtin_sets
from sagemeter.results import load_result, result_path

QUESTIONS_KEY = "measure.questions"


def freeze_paths(plan: Plan, base: Path) -> Plan:
    """`plan` with every path it names made absolute against `base` (the plan file's folder)."""
    questions = anchored_questions(plan.measure.questions, base)
    measure = plan.measure.model_copy(update={"questions": questions})
    arms = [
        arm.model_copy(update={"target": anchored_target(arm.target, base)}) if arm.target else arm
        for arm in plan.arms
    ]
    return plan.model_copy(update={"measure": measure, "arms": arms})


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def input_files(plan: Plan) -> list[FrozenInput]:
    """The plan's input files read whole by the run, each with its sha256 now: the questions
    file and each `local:` arm's own .gguf file (a vLLM folder is identified by its results)."""
    named: list[tuple[str, str]] = []
    questions = plan.measure.questions
    if questions is not None and questions not in builtin_sets():
        named.append((QUESTIONS_KEY, questions))
    for arm in plan.arms:
        target = (arm.target or "").strip()
        checkpoint = target.removeprefix("local:").strip()
        if target.startswith("local:") and checkpoint not in NAMED_CHECKPOINTS:
            named.append((f'arm "{arm.name}".target', checkpoint))
    found = []
    for key, value in named:
        path = Path(value)
        if path.is_file():  # else check_ready has said so already
            found.append(FrozenInput(key=key, path=str(path), sha256=sha256_of(path)))
    return found


def check_unchanged(run_dir: Path, journal: Journal) -> None:
    """Refuse a resume whose plan.toml was edited, or whose input files changed, since the
    run started (journals from before these were kept are taken as they are)."""
    plan_file = run_dir / PLAN_FILE
    if journal.plan_sha256 is not None:
        if not plan_file.is_file():
            raise UserError(
                f"{plan_file}: missing; the run started from it: restore it, or start a new "
                "run with `sagemeter run PLAN.toml`"
            )
        if sha256_of(plan_file) != journal.plan_sha256:
            raise UserError(
                f"{plan_file}: edited since the run started (a resume runs the plan it started "
                "with); restore the file, or start a new run with `sagemeter run PLAN.toml`"
            )
    for frozen in journal.inputs:
        path = Path(frozen.path)
        found = sha256_of(path) if path.is_file() else None
        if found != frozen.sha256:
            what = "missing" if found is None else "changed since the run started"
            raise UserError(
                f"{path} ({frozen.key}): {what}; the run's results were measured with the file "
                "as it was: restore it, or start a new run"
            )


def started_since(path: Path, began: str | None) -> bool:
    """Whether the result in `path` began measuring at or after `began` (unknown: assume so)."""
    try:
        result = load_result(path)
    except UserError:
        return False
    started = result.detail.environment.started_utc if result.detail else None
    if began is None or started is None:
        return True
    try:  # a result's start is kept to the second, a step's to the millisecond
        return parse_utc(started) >= parse_utc(began).replace(microsecond=0)
    except ValueError:
        return True


def _written_by_the_step(path: Path, step: StepRecord) -> bool:
    """A result file the journal does not list is the run's own only when its measure step was
    under way when the session before ended (killed between writing it and the journal) and it
    was measured since that step began."""
    return step.state in ("running", "stopped", "failed") and started_since(path, step.started_utc)


def check_results(run_dir: Path, journal: Journal) -> None:
    """Refuse a resume when a result file the run wrote was changed since, or when a result
    file is there for a visit the run did not write it for (copied in from elsewhere): the
    run would keep it as measured. A journal from before results were kept is taken as it is."""
    if journal.results is None:
        return
    for step in journal.steps:
        if step.kind != "measure":
            continue
        for name in step.results:
            path = result_path(run_dir, name)
            refuse_special(path, "the result file")  # a link, FIFO or device: named as such
            if not path.is_file():
                continue  # deleted since: measured again
            kept = journal.results.get(name)
            if kept is not None:
                if sha256_of(path) != kept:
                    raise UserError(
                        f"{path}: changed since the run wrote it (the journal keeps its "
                        "sha256); restore it, or delete it to measure that arm again"
                    )
            elif not _written_by_the_step(path, step):
                raise UserError(
                    f"{path}: not written by this run (the journal has no record of it); "
                    "move it away to have the run measure that arm"
                )


def check_all_unchanged(run_dir: Path, journal: Journal) -> None:
    """Everything a resume checks before any work: plan.toml, the input files, the results."""
    check_unchanged(run_dir, journal)
    check_results(run_dir, journal)
