"""`sagemeter run`: a whole comparison from a plan file, step by step, resumable; and the demo's
face, which is the same run with a built-in plan.

Thin: it reads options, calls `sagemeter.experiment`, and draws what happens. Ctrl-C and SIGTERM
ask the run to stop: the step in progress ends, everything the run created is deleted (an
endpoint still Creating is waited out first), and the run says so. A second Ctrl-C leaves that
to `--resume` or `sagemeter sagemaker delete`, and says what still runs and what it costs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from sagemeter import sagemaker as sm
from sagemeter.cli import interrupt as activity
from sagemeter.errors import UserError
from sagemeter.experiment import (
    FINISHED_STEPS,
    Abandoned,
    Estimate,
    Journal,
    Plan,
    Prepared,
    RunEvents,
    RunOutcome,
    StepRecord,
    StopFlag,
    check_ready,
    estimate,
    execute,
    finished_line,
    freeze_paths,
    left_running_lines,
    load_plan,
    resume_hint,
    resume_run,
    start_run,
)
from sagemeter.experiment.estimate import quotas
from sagemeter.measure import ProgressFn
from sagemeter.measure.workflow import PhaseFn
from sagemeter.printable import SafeConsole, printable
from sagemeter.sagemaker.endpoint import DEFAULT_POLL_S
from sagemeter.sagemaker.redact import redact

EXIT_FAILED = 1
EXIT_INCOMPLETE = 3
EXIT_BY_SIGNAL = {"Ctrl-C": 130, "SIGTERM": 143, "SIGHUP": 129}
# SIGHUP: a closed terminal or SSH session stops the run like Ctrl-C (clean up, journal, exit).
SIGNAL_NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}


def _out() -> Console:
    console = SafeConsole(highlight=False, soft_wrap=True)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = max(console.width, 160)
    return console


def _err() -> Console:
    return SafeConsole(stderr=True, highlight=False, soft_wrap=True)


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds:.1f} s" if seconds < 60 else f"{seconds / 60:.1f} min"


def _money(value: float | None) -> str:
    return "?" if value is None else f"${value:,.2f}"


# --------------------------------------------------------------------------- signals


class SignalStop:
    """Ctrl-C / SIGTERM / SIGHUP → the run's StopFlag; the second one → `Abandoned` at once."""

    def __init__(self, stop: StopFlag, console: Console) -> None:
        self.stop = stop
        self.console = console
        self.first: str | None = None

    def _handle(self, signum: int, _: FrameType | None) -> None:
        name = SIGNAL_NAMES.get(signal.Signals(signum), f"signal {signum}")
        if self.first is None:
            self.first = name
            already = self.stop.reason
            self.stop.request(name, "signal")
            what = f"already stopping ({already})" if already else "stopping"
            with contextlib.suppress(OSError):  # a hung-up terminal refuses writes
                os.write(
                    2,
                    f"\n{name}: {what}; everything this run created will be deleted before it "
                    f"exits ({name} again leaves that to --resume)\n".encode(),
                )
            return
        for each in SIGNAL_NAMES:  # a third one ends the process the ordinary way
            signal.signal(
                each, signal.default_int_handler if each == signal.SIGINT else signal.SIG_DFL
            )
        raise Abandoned(name)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        previous = {each: signal.signal(each, self._handle) for each in SIGNAL_NAMES}
        try:
            yield
        finally:
            for each, handler in previous.items():
                signal.signal(each, handler)


# --------------------------------------------------------------------------- what is drawn


class Screen:
    """Draws a run: one line per step (status, elapsed, cost so far), a bar per measurement,
    the deploy's and delete's progress. `quiet` draws only the bars (the demo)."""

    def __init__(self, console: Console, total_steps: int, quiet: bool = False) -> None:
        self.console = console
        self.total = total_steps
        self.quiet = quiet
        self.bars: Progress | None = None
        self._tasks: dict[str, Any] = {}
        self._cloud_seen: tuple[str, str, str | None] | str | None = None

    def events(self) -> RunEvents:
        return RunEvents(
            step_started=self.step_started,
            step_finished=self.step_finished,
            measuring=self.measuring,
            cloud=self.cloud,
            note=self.note,
            deleted=self.deleted,
        )

    def _cost(self, journal: Journal) -> str:
        return f", {journal.cost_so_far()}"

    def step_started(self, record: StepRecord, journal: Journal) -> None:
        if not self.quiet:
            self.console.print(f"[{record.index}/{self.total}] {escape(record.label)} …")
        if record.kind == "measure":
            from sagemeter.cli.common import new_progress

            self.bars = new_progress()
            self.bars.start()

    def close(self, state: str = "stopped") -> None:
        """End the measurement bars (also when the step ended by an exception)."""
        if self.bars is not None:
            for name, task in self._tasks.items():
                self.bars.update(task, description=f"{name}: {state}")
            self.bars.stop()
            self.bars, self._tasks = None, {}

    def step_finished(self, record: StepRecord, journal: Journal) -> None:
        self.close(record.state)
        if self.quiet:
            return
        note = f": {escape(printable(redact(record.note)))}" if record.note else ""
        self.console.print(
            f"[{record.index}/{self.total}] {escape(record.label)} {record.state} "
            f"({_minutes(record.elapsed_s)}{self._cost(journal)}){note}"
        )

    def measuring(self, name: str, total: int) -> tuple[ProgressFn, PhaseFn]:
        bars = self.bars
        if bars is None:
            return (lambda _: None), (lambda _: None)
        task = bars.add_task(name, total=total)
        self._tasks[name] = task
        return (
            lambda count: bars.advance(task, count),
            lambda phase: bars.update(task, description=escape(f"{name}: {phase}")),
        )

    def cloud(self, progress: sm.Progress | str) -> None:
        if isinstance(progress, str):  # a plug-in platform's news, one line, said once
            if progress != self._cloud_seen:
                self._cloud_seen = progress
                self.note(progress)
            return
        key = (progress.region, progress.phase, progress.status)
        if key == self._cloud_seen:
            return
        self._cloud_seen = key
        status = f" {progress.status}" if progress.status else ""
        self.console.print(
            f"  ⏳ {progress.name}@{progress.region}  {escape(progress.phase)}{status}  "
            f"{progress.elapsed_s / 60:.1f} min"
        )

    def note(self, text: str) -> None:
        self.close()
        self.console.print(f"  {escape(printable(redact(text)))}")

    def deleted(self, report: sm.DeleteReport | str) -> None:
        if isinstance(report, str):  # a plug-in platform's report, one line
            self.note(report)
            return
        steps = ", ".join(f"{step.kind} {step.outcome}" for step in report.steps)
        self.console.print(f"  🗑️ {report.name}@{report.region}: {steps}")


# --------------------------------------------------------------------------- dry run


def _print_estimate(console: Console, plan: Plan, run_dir: Path, planned: Estimate) -> None:
    console.print(
        f"plan {plan.name}: {len(plan.arms)} arms, order {plan.order_text}, "
        f"{len(planned.steps)} steps, into {run_dir}"
    )
    table = Table()
    for column in ("#", "step", "creates", "time", "cost"):
        table.add_column(column, justify="right" if column in ("#", "time", "cost") else "left",
                         overflow="fold")  # fmt: skip
    for row in planned.steps:
        cost = "" if row.usd is None and row.label.split()[0] != "deploy" else _money(row.usd)
        table.add_row(str(row.index), escape(row.label), escape(row.creates),
                      f"{row.minutes:.1f} min", cost)  # fmt: skip
    console.print(table)
    unpriced = (
        f" + arm {', '.join(planned.unpriced)} at an unknown price" if planned.unpriced else ""
    )
    cap = f"; spend cap {_money(plan.max_cost_usd)}" if plan.max_cost_usd is not None else ""
    console.print(
        f"total: about {planned.minutes:.0f} min, about {_money(planned.usd)}{unpriced}{cap}"
    )
    for arm, price in planned.prices.items():
        rate = "?" if price.usd_per_hour is None else f"${price.usd_per_hour:,.4f}/h"
        console.print(f"price of {arm}: {rate} ({escape(redact(price.note))})")
    console.print(f"assumptions: {escape(planned.assumptions)}")


def _print_quota(console: Console, plan: Plan, checked: dict[str, object]) -> None:
    """What the deployed arms need at once against what each platform's account allows."""
    for line in quotas(plan, checked):
        console.print(escape(line))


def dry_run(
    plan: Plan, out: Path | None, resume_dir: Path | None = None, *, folder: Path | None = None
) -> None:
    """Print the steps, what each creates, time, cost and quota; create nothing. `folder`: the
    plan file's, where a cmd: arm's command would run."""
    console = _out()
    if resume_dir is not None:
        prepared = resume_run(resume_dir)
        assert prepared.estimate is not None
        finished = {s.index for s in prepared.journal.steps if s.state in FINISHED_STEPS}
        rows = [row for row in prepared.estimate.steps if row.index not in finished]
        minutes = round(sum(row.minutes for row in rows), 1)
        planned = prepared.estimate.model_copy(update={"steps": rows, "minutes": minutes})
        _print_estimate(console, prepared.plan, resume_dir, planned)
        spent, _ = prepared.journal.cost()
        console.print(f"spent so far: {_money(spent)}; steps done are not run again")
        console.print("nothing was created")
        return
    from sagemeter.experiment import default_run_dir
    from sagemeter.experiment.runner import check_cap

    where = str(folder) if folder is not None else None
    checked = check_ready(plan, fresh=True, need_credentials=False, folder=where)
    planned = estimate(plan, checked)
    _print_estimate(console, plan, out or default_run_dir(plan.name), planned)
    _print_quota(console, plan, checked)
    console.print("nothing was created")
    check_cap(plan, planned)


# --------------------------------------------------------------------------- run


def run_prepared(
    prepared: Prepared, *, poll_s: float, quiet: bool = False
) -> tuple[RunOutcome, int]:
    """Execute with Ctrl-C/SIGTERM handled; print how it ended; the exit code to use."""
    from sagemeter.report.writer import write_report  # the report step's; loaded for a run only

    err = _err()
    stop = StopFlag()
    screen = Screen(err, len(prepared.journal.steps), quiet=quiet)
    signals = SignalStop(stop, err)
    with signals.installed():
        try:
            outcome = execute(
                prepared, screen.events(), stop, write_report=write_report, poll_s=poll_s
            )
        finally:
            screen.close()
    return outcome, report_outcome(outcome, signals.first, err)


def report_outcome(outcome: RunOutcome, signal_name: str | None, err: Console) -> int:
    """The last lines of a run that did not end well (or ended incomplete), and its exit code."""
    if outcome.state == "done":
        if outcome.incomplete:
            err.print(f"[yellow]incomplete:[/] {escape(printable('; '.join(outcome.incomplete)))}")
            return EXIT_INCOMPLETE
        return 0
    made = outcome.journal.deployments
    err.print(
        f"[red]{outcome.state}:[/] {escape(printable(redact(outcome.stopped_because or '')))}"
    )
    if outcome.left_running:
        err.print(
            "still running (it bills until deleted): " + "; ".join(left_running_lines(outcome))
        )
        err.print(f"finish with {resume_hint(outcome)}")
    else:
        if made:
            gone = ", ".join(dict.fromkeys(d.target for d in made))
            err.print(f"deleted everything this run created ({gone}); nothing is left billing")
        so_far = measured_so_far(outcome)
        if so_far:
            err.print(so_far)
        err.print(resume_advice(outcome))
    if made:
        err.print(f"cost so far: about ${outcome.cost_usd:,.2f}")
    if outcome.stop_kind == "signal" or outcome.abandoned:
        return EXIT_BY_SIGNAL.get(signal_name or "Ctrl-C", 130)
    return EXIT_FAILED


def measured_so_far(outcome: RunOutcome) -> str | None:
    """What a run that did not finish has measured, and how to see it (its report follows the
    journal until the run writes compare.json)."""
    from sagemeter.results import result_path

    run_dir = Path(outcome.run_dir)
    names = dict.fromkeys(outcome.journal.measured)
    kept = [
        result_path(run_dir, name).name for name in names if result_path(run_dir, name).is_file()
    ]
    if not kept:
        return None
    return f"measured so far: {', '.join(kept)} (`sagemeter report {run_dir}` shows them)"


def resume_advice(outcome: RunOutcome) -> str:
    """The last line of a failed run: resume it, or, when it failed just as the session before
    did, fix the cause first (a resume as is would repeat it: a run never loops)."""
    resume = f"`sagemeter run --resume {outcome.run_dir}`"
    if outcome.same_failure:
        return (
            f"the session before failed at this step too: a resume as is repeats it; fix what "
            f"it says, then {resume}"
        )
    return f"continue it with {resume}"


def run_command(
    plan: Annotated[Path | None, typer.Argument(help="the plan file (TOML)")] = None,
    out: Annotated[Path | None, typer.Option(help="run folder (default: runs/DATE-NAME)")] = None,
    resume: Annotated[
        Path | None, typer.Option(help="continue the run in this folder from its journal")
    ] = None,
    poll_seconds: Annotated[float, typer.Option(hidden=True)] = DEFAULT_POLL_S,
    **options: Any,
) -> None:
    """Run a whole comparison from a plan: deploy, measure, delete each arm in order (A-B-A by
    default), then combine and report; resumable, and nothing is left billing.

    Exits 0 when done (3 when a result is incomplete), 1 when a step failed or the
    spend cap stopped it, 2 for a bad plan, 130 (Ctrl-C) or 143 (SIGTERM) when interrupted.
    """
    from sagemeter.cli.sagemaker import guarded
    from sagemeter.options.faces import read_options
    from sagemeter.options.run import RUN, RunOptions

    (given,) = read_options(RUN, options, "cli")
    assert isinstance(given, RunOptions)
    guarded(_run)(plan, out, given.dry_run, resume, given.max_cost_usd, poll_seconds)


def _run(
    plan_file: Path | None,
    out: Path | None,
    dry_run_only: bool,
    resume: Path | None,
    max_cost_usd: float | None,
    poll_s: float,
) -> None:
    if (plan_file is None) == (resume is None):
        raise UserError("give a PLAN file, or --resume RUN_DIR (not both)")
    if resume is not None and out is not None:
        raise UserError("--out goes with a PLAN file; --resume continues in the run's own folder")
    if plan_file is not None and max_cost_usd is not None:
        raise UserError(
            "--max-cost-usd goes with --resume; in a new run, set max_cost_usd in the plan"
        )
    err = _err()
    if plan_file is not None:
        plan, text = load_plan(plan_file)
        # Relative paths mean the plan file's folder, resolved once here and frozen in the journal.
        folder = plan_file.expanduser().resolve().parent
        plan = freeze_paths(plan, folder)
        if dry_run_only:
            dry_run(plan, out, folder=folder)
            return
        prepared = start_run(
            plan, out=out, plan_text=text, plan_source=str(plan_file), plan_folder=folder
        )
        activity.doing(f"running {plan_file} into {prepared.run_dir}")
        header = f"run {plan.name}: order {plan.order_text}, {len(prepared.journal.steps)} steps"
    else:
        assert resume is not None
        if dry_run_only:
            dry_run(_plan_of(resume), None, resume)
            return
        prepared = resume_run(resume, max_cost_usd=max_cost_usd)
        activity.doing(f"resuming the run in {resume}")
        if prepared.journal.state == "done":
            _out().print(finished_line(resume, prepared.journal))
            if prepared.journal.incomplete:  # finished, but not whole: never exit 0 for it
                raise typer.Exit(EXIT_INCOMPLETE)
            return
        done = sum(1 for s in prepared.journal.steps if s.state in FINISHED_STEPS)
        header = (
            f"resuming {prepared.plan.name}: {done} of {len(prepared.journal.steps)} steps done"
        )
    planned = prepared.estimate
    guess = (
        f"; about {planned.minutes:.0f} min" + (f", {_money(planned.usd)}" if planned.usd else "")
        if planned
        else ""
    )
    cap = f", spend cap {_money(prepared.plan.max_cost_usd)}" if prepared.plan.max_cost_usd else ""
    err.print(f"{header}, into {prepared.run_dir}{guess}{cap}")
    began = time.monotonic()
    outcome, code = run_prepared(prepared, poll_s=poll_s)
    if outcome.state == "done":
        _print_done(outcome, time.monotonic() - began)
    if code:
        raise typer.Exit(code)


def _plan_of(run_dir: Path) -> Plan:
    from sagemeter.experiment import plan_from_data, read_journal

    return plan_from_data(read_journal(run_dir).plan, str(run_dir))


def _print_done(outcome: RunOutcome, wall_s: float) -> None:
    from sagemeter.report.terminal import print_comparison

    out = _out()
    if outcome.comparison is not None:
        print_comparison(out, outcome.comparison)
    run_dir = Path(outcome.run_dir)
    cost = f", about ${outcome.cost_usd:,.2f}" if outcome.journal.deployments else ""
    out.print(
        f"wrote {run_dir} (report: {run_dir / 'report.html'}, {run_dir / 'report.md'}) in "
        f"{_minutes(wall_s)}{cost}"
    )


# --------------------------------------------------------------------------- demo


def demo_face(
    out: Path | None,
    quick: bool,
    questions: str | None,
    questions_per_family: int | None,
    margin: float | None,
    fidelity: int | None,
) -> None:
    """`sagemeter demo`: the built-in plan, drawn as the demo always was (bars, the table)."""
    from sagemeter.cli.common import console
    from sagemeter.experiment import visits
    from sagemeter.experiment.demo import demo_plan, demo_plan_text, demo_run_dir
    from sagemeter.report.terminal import print_comparison

    plan = demo_plan(
        quick,
        {
            "questions": questions,
            "questions_per_family": questions_per_family,
            "margin": margin,
            "fidelity": fidelity,
        },
    )
    from sagemeter.cli import interrupt as activity

    plan = freeze_paths(plan, Path.cwd())  # --questions FILE means this folder, on resume too
    run_dir = out or demo_run_dir()
    prepared = start_run(
        plan, out=run_dir, plan_text=demo_plan_text(plan), plan_source="built-in demo"
    )
    activity.doing(f"running the demo into {run_dir}")
    console.print(f"demo: {' → '.join(v.result_name for v in visits(plan))} into {run_dir}")
    outcome, code = run_prepared(prepared, poll_s=DEFAULT_POLL_S, quiet=True)
    if outcome.state == "done" and outcome.comparison is not None:
        print_comparison(console, outcome.comparison)
        console.print(
            f"wrote {run_dir} (report: {run_dir / 'report.html'}, {run_dir / 'report.md'})"
        )
    if code and outcome.state != "done":  # the demo exits 0 when done, a figure missing or not
        raise typer.Exit(code)


def demo(
    out: Annotated[Path | None, typer.Option(help="run folder [runs/DATE-demo]")] = None,
    quick: Annotated[bool, typer.Option(help="shrink everything, for smoke tests")] = False,
    **options: Any,
) -> None:
    """A-B-A on the embedded engine: 32-bit, 4-bit, 32-bit again; then the comparison."""
    from sagemeter.cli.run import demo_face  # the built-in plan, run as `sagemeter run` runs one

    demo_face(
        out,
        quick,
        options.get("questions"),
        options.get("questions_per_family"),
        options.get("margin"),
        options.get("fidelity"),
    )


def register(app: typer.Typer) -> None:
    """Add `run` and `demo` to the main app."""
    from sagemeter.experiment.demo import DEMO, DEMO_FLAGS
    from sagemeter.options.faces import with_options

    # --questions, --questions-per-family, --margin, --fidelity: measure's, the demo's defaults
    app.command()(with_options(DEMO, "cli", only=DEMO_FLAGS)(demo))
    from sagemeter.options.run import RUN

    # --dry-run, --max-cost-usd: run's options model, which run_experiment's arguments share
    command = with_options(RUN, "cli")(run_command)
    app.command("run", help=(run_command.__doc__ or "").strip())(command)
