"""Run a plan's steps in order, with the journal written around each, and nothing left billing.

`start_run` checks the plan against the world (targets, credentials, role, regions, endpoint
names, the spend cap against the estimate) before it makes the run folder; `resume_run` reads a
folder's journal instead, after checking that its plan.toml and input files are unchanged
(frozen.py). `execute` then runs every step that is not done yet:

- deploy: the arm's platform (`[arm.sagemaker]`: SageMaker; a plug-in's `[arm.NAME]`, found
  by platforms/registry.py) deploys it, with its fallbacks; where it was placed, and its price,
  go into the journal and are what the arm is measured, priced and deleted by. On resume, an
  endpoint from before is adopted by its platform when it still answers, else deleted and
  deployed again.
- measure: `sagemeter.measure.workflow.measure_target`; a visit whose result file exists is never
  measured again. Interleaved, the arms are measured together, taking turns (turns.py). A step
  whose result is incomplete ends `incomplete` and the run goes on to combine and report: a run
  never loops on it. The journal's `measured` keeps the time order the results were written in.
- delete: the platform deletes whatever the deploy left.
- combine and report: `sagemeter.compare.combine`, and the report writer the face hands to
  `execute` (`sagemeter.report.writer.write_report`: report sits above this package and reads
  its journals).

A stop (Ctrl-C, SIGTERM, the spend cap, a cancelled MCP call) or a failed step ends the step in
progress, then deletes everything the run created that may still exist, waiting out an endpoint
that is still starting. `Abandoned` (a second Ctrl-C) skips that, and the outcome lists what
still runs and what it costs.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from sagemeter import filekinds, signal_wakeup
from sagemeter.atomic import check_output_file, check_output_folder, write_text_atomic
from sagemeter.compare import Comparison, combine, save_comparison
from sagemeter.compare.combine import recorded_price
from sagemeter.engines.endpoints import check_target
from sagemeter.errors import (
    InputError,
    ManyProblems,
    SagemeterError,
    UserError,
    exit_code,
    reworded,
)
from sagemeter.experiment.estimate import Estimate, estimate
from sagemeter.experiment.frozen import (
    check_all_unchanged,
    input_files,
    sha256_of,
    started_since,
)
from sagemeter.experiment.journal import (
    JOURNAL_FILE,
    PLAN_FILE,
    Journal,
    RunState,
    StepRecord,
    read_journal,
    run_lock,
    this_session,
)
from sagemeter.experiment.plan import (
    Arm,
    Plan,
    deployed_by_platform,
    plan_from_data,
    stop_problems,
)
from sagemeter.experiment.quality_stop import QualityStop
from sagemeter.experiment.steps import (
    StepSpec,
    Visit,
    combine_order,
    measured_order,
    plan_steps,
    visits,
)
from sagemeter.experiment.stop import Abandoned, CapWatch, StopFlag, StopKind, Stopped
from sagemeter.experiment.turns import TakingTurns, Turns
from sagemeter.fidelity.records import FidelityRecord
from sagemeter.measure import ProgressFn
from sagemeter.measure.workflow import (
    PhaseFn,
    engine_log_path,
    measure_target,
    selected_questions,
    total_requests,
)
from sagemeter.platforms.deployment import Deployment, parse_utc, utc_now
from sagemeter.platforms.registry import CheckProblems, Hooks, Platform, platform_of
from sagemeter.results import MeasureResult, load_result, result_path
from sagemeter.targets import OpenAITarget, Target, run_in
from sagemeter.textfiles import probe_json
from sagemeter.transport.batch import batches_on_ray
from sagemeter.transport.chat import ChatClient
from sagemeter.transport.ray_pool import require_ray
from sagemeter.transport.request import check_api_key

COMPARE_FILE = "compare.json"
DEFAULT_POLL_S = 15.0  # how often a platform's waits look again (SageMaker's describe calls)
STOP_POLL_S = 0.1  # how often a measurement looks for a stop request


def _nothing(*_: Any) -> None:
    """An event nobody listens to."""


def _no_bars(_: str, __: int) -> tuple[ProgressFn, PhaseFn]:
    return _nothing, _nothing


@dataclass
class RunEvents:
    """What a face hears while a run goes on; every callback is optional."""

    step_started: Callable[[StepRecord, Journal], None] = _nothing
    step_finished: Callable[[StepRecord, Journal], None] = _nothing
    # Given a result's name and its request count: that measurement's progress and phase callbacks.
    measuring: Callable[[str, int], tuple[ProgressFn, PhaseFn]] = _no_bars
    # A platform's news while it deploys or deletes, and a delete's report (SageMaker's:
    # sagemeter.sagemaker's Progress and DeleteReport), for the face to print.
    cloud: Callable[[Any], None] = _nothing
    note: Callable[[str], None] = _nothing
    deleted: Callable[[Any], None] = _nothing


@dataclass
class Prepared:
    """A run ready to execute: its plan, folder, journal, and what it checked."""

    plan: Plan
    run_dir: Path
    journal: Journal
    # What each platform's check found, by platform name (the platform's own answer).
    checked: dict[str, object] = field(default_factory=dict)
    estimate: Estimate | None = None


class RunOutcome(BaseModel):
    run_dir: str
    state: RunState
    stop_kind: StopKind | None = None
    stopped_because: str | None = None
    comparison: Comparison | None = None
    cost_usd: float = 0.0
    cost_note: str | None = None
    left_running: list[Deployment] = Field(default_factory=list)
    incomplete: list[str] = Field(default_factory=list)
    abandoned: bool = False
    same_failure: bool = Field(
        False,
        description="failed at the step the session before failed at (or for the same "
        "reason): a resume as is would only repeat it",
    )
    journal: Journal


# --------------------------------------------------------------------------- before anything


_T = TypeVar("_T")


def default_run_dir(name: str, root: Path = Path("runs")) -> Path:
    """runs/DATE-NAME, or runs/DATE-HHMMSS-NAME when that folder already holds something (or
    that name is anything but a folder: a file, a FIFO, a link is never written through)."""
    now = datetime.now(UTC)
    candidate = root / f"{now:%Y-%m-%d}-{name}"
    taken = candidate.is_symlink() or (candidate.exists() and not candidate.is_dir())
    if taken or (candidate.is_dir() and any(candidate.iterdir())):  # a file, a FIFO, a link
        candidate = root / f"{now:%Y-%m-%d-%H%M%S}-{name}"
    return candidate


def check_ready(
    plan: Plan,
    *,
    fresh: bool,
    need_credentials: bool = True,
    source: str = "plan",
    folder: str | None = None,
) -> dict[str, object]:
    """Everything that can be known before a step runs: the question set, each target (a cmd:
    arm's as it will run, in the plan's `folder`), and for deployed arms what their platform
    checks (SageMaker's: the credentials, region, role and spec and, for a new run, free
    names), and a sequential stop's looks for the question set. Every problem found is
    reported at once (several under `source`), so a plan is mended in one go. The answer: what
    each platform's check found, by platform name."""
    problems = _Problems()
    questions = _collect(problems, lambda: selected_questions(plan.settings()))
    if questions is not None:
        problems += stop_problems(plan, len(questions.questions))
    if plan.measure.ray is not None:
        _collect(problems, require_ray, label="measure.ray", strip="--ray ")
    for arm in plan.arms:
        if arm.target is not None:
            _collect(problems, _target_check(arm, folder), label=f'arm "{arm.name}".target')
    _collect(problems, partial(_check_env_key, plan))
    checked: dict[str, object] = {}
    for name, arms in deployed_by_platform(plan).items():
        check = partial(
            platform_of(name).check,
            plan,
            arms,
            fresh=fresh and not problems,
            need_credentials=need_credentials,
        )
        found = _collect(problems, check)
        if found is not None:
            checked[name] = found
    _raise_all(problems, source)
    return checked


def _target_check(arm: Arm, folder: str | None) -> Callable[[], None]:
    """The arm's target parsed and checked, as one step `_collect` can run."""

    def check() -> None:
        check_target(arm_target(arm, folder))

    return check


def arm_target(arm: Arm, folder: str | None) -> Target:
    """An arm's target as the run starts it: a `cmd:` arm's command runs in the plan's folder
    (`folder`, frozen in the journal), so its relative paths mean what the plan's others do,
    wherever `--resume` is typed."""
    target = arm.parsed_target()
    if folder is None:
        return target
    started = run_in(target, folder)
    if started != target and not Path(folder).is_dir():
        raise UserError(
            f"{folder}: the plan's folder, where this cmd: arm's command runs, is gone; "
            "restore it, or start a new run"
        )
    return started


class _Problems(list[str]):
    """The problems found so far, one line each, and the first that was not bad input (a
    cloud or engine failure), whose kind the whole report keeps (its exit code)."""

    failure: SagemeterError | None = None


def _collect(
    problems: _Problems, check: Callable[[], _T], *, label: str = "", strip: str = ""
) -> _T | None:
    """Run one check and give its answer; its error (each of a ManyProblems) joins `problems`
    instead, under `label`."""
    try:
        return check()
    except ManyProblems as exc:
        problems.extend(f"{label}: {one}" if label else one for one in exc.problems)
        failure = exc.failure if isinstance(exc, CheckProblems) else None
        if failure is not None and problems.failure is None:
            problems.failure = failure
    except UserError as exc:
        text = str(exc).removeprefix(strip)
        problems.append(f"{label}: {text}" if label else text)
        if exit_code(exc) != exit_code(InputError()) and problems.failure is None:
            problems.failure = exc
    return None


def _raise_all(problems: _Problems, source: str) -> None:
    """One problem as itself (its wording unchanged); several as one ManyProblems; either of
    the kind of the first failure among them when one was not bad input."""
    unique = list(dict.fromkeys(problems))
    if not unique:
        return
    error: SagemeterError = (
        UserError(unique[0]) if len(unique) == 1 else ManyProblems(source, unique)
    )
    if problems.failure is not None:
        raise reworded(problems.failure, str(error))
    raise error


def check_cap(plan: Plan, planned: Estimate, spent: float = 0.0) -> None:
    """A cap the estimate already exceeds, or that cannot be checked, stops the run here."""
    cap = plan.max_cost_usd
    if cap is None:
        return
    if planned.unpriced:
        arms = ", ".join(planned.unpriced)
        notes = "; ".join(
            planned.prices[name].note for name in planned.unpriced if name in planned.prices
        )
        raise UserError(
            f"max_cost_usd: cannot be checked, the price of arm {arms} is unknown ({notes}); "
            "give price_per_hour"
        )
    total = spent + planned.usd
    if total > cap:
        so_far = f"${spent:,.2f} spent and " if spent else ""
        raise UserError(
            f"max_cost_usd: ${cap:,.2f} is below the estimated cost: {so_far}${planned.usd:,.2f} "
            f"to go, about {planned.minutes:.0f} min ({planned.assumptions}); raise the cap or "
            "shorten the plan"
        )


def start_run(
    plan: Plan,
    *,
    out: Path | None,
    plan_text: str | None,
    plan_source: str,
    plan_folder: Path | None = None,
) -> Prepared:
    """Check everything, then make the run folder with the plan and a fresh journal.
    `plan_folder` (default: the current folder) is what the plan's relative paths mean: the
    caller has anchored them there (`freeze_paths`); a cmd: arm's command runs there."""
    folder = str((plan_folder or Path.cwd()).expanduser().resolve())
    checked = check_ready(plan, fresh=True, source=plan_source, folder=folder)
    planned = estimate(plan, checked)
    check_cap(plan, planned)
    run_dir = out or default_run_dir(plan.name)
    if (run_dir / JOURNAL_FILE).exists():
        raise UserError(
            f"{run_dir} already holds a run: continue it with `sagemeter run --resume {run_dir}`, "
            "or choose another --out"
        )
    if run_dir.exists() and not run_dir.is_dir():
        check_output_folder(run_dir, "--out")  # says what is there (a file, a device, a FIFO)
    if run_dir.exists() and any(run_dir.iterdir()):
        raise UserError(f"{run_dir} is not empty: choose another --out (or an empty folder)")
    check_output_folder(run_dir, "--out")  # made here, and proved writable
    plan_sha256 = None
    if plan_text is not None:
        write_text_atomic(run_dir / PLAN_FILE, plan_text)
        plan_sha256 = sha256_of(run_dir / PLAN_FILE)
    journal = Journal(
        name=plan.name,
        run_dir=str(run_dir.resolve()),
        plan=plan.to_data(),
        plan_source=plan_source,
        plan_sha256=plan_sha256,
        inputs=input_files(plan),
        plan_folder=folder,
        results={},
        max_cost_usd=plan.max_cost_usd,
        steps=[
            StepRecord(
                index=index,
                kind=step.kind,
                label=step.label,
                results=[visit.result_name for visit in step.visits],
            )
            for index, step in enumerate(plan_steps(plan), start=1)
        ],
    )
    journal.save(run_dir)
    return Prepared(plan=plan, run_dir=run_dir, journal=journal, checked=checked,
                    estimate=planned)  # fmt: skip


def resume_run(
    run_dir: Path,
    *,
    max_cost_usd: float | None = None,
    vet: Callable[[Plan], Plan] | None = None,
) -> Prepared:
    """A run folder's plan and journal, checked again; `max_cost_usd` replaces the cap. `vet`
    (the MCP face's path rules) sees the plan before anything it names is read."""
    journal = read_journal(run_dir)
    check_all_unchanged(run_dir, journal)
    data = dict(journal.plan)
    if max_cost_usd is not None:
        if max_cost_usd <= 0:
            raise UserError("--max-cost-usd must be a positive number of USD")
        data["max_cost_usd"] = max_cost_usd
        journal.max_cost_usd = max_cost_usd
    plan = plan_from_data(data, str(run_dir / JOURNAL_FILE))
    if vet is not None:
        plan = vet(plan)
    if [s.label for s in journal.steps] != [s.label for s in plan_steps(plan)]:
        raise UserError(f"{run_dir / JOURNAL_FILE}: its steps do not match its plan")
    checked = check_ready(
        plan, fresh=False, source=str(run_dir / JOURNAL_FILE), folder=journal.plan_folder
    )
    check_run_outputs(run_dir, plan)
    remaining = {
        visit.result_name for visit in visits(plan) if not _measured(run_dir, visit.result_name)
    }
    planned = estimate(plan, checked, remaining=remaining)
    spent, _ = journal.cost()
    if journal.state != "done":
        check_cap(plan, planned, spent)
    return Prepared(plan=plan, run_dir=run_dir, journal=journal, checked=checked,
                    estimate=planned)  # fmt: skip


def finished_line(run_dir: Path, journal: Journal) -> str:
    """What `--resume` of a finished run says: done, or done with an arm incomplete, which a
    resume cannot mend (its result is kept; a new run measures it again)."""
    if journal.incomplete:
        names = ", ".join(line.split(":", 1)[0] for line in journal.incomplete)
        return (
            f"{run_dir}: this run is finished, {names} incomplete (marked in compare.json and "
            "the report); nothing to resume: start a new run to measure again"
        )
    return f"{run_dir}: this run is done; nothing to resume"


def check_run_outputs(run_dir: Path, plan: Plan) -> None:
    """Every file a resumed run writes in its folder, checked before a step runs (a deploy
    bills by the hour): never a link, a FIFO or a device, never a result of another kind."""
    journal, compared = run_dir / JOURNAL_FILE, run_dir / COMPARE_FILE
    check_output_file(journal, "the journal", force=True, kind=filekinds.JOURNAL)
    check_output_file(compared, "the comparison", force=True, kind=filekinds.COMPARISON)
    for visit in visits(plan):
        path = result_path(run_dir, visit.result_name)
        check_output_file(path, "the result file", force=True, kind=filekinds.MEASURE)
        check_output_file(engine_log_path(run_dir, visit.result_name), "the engine log", force=True)


def _wrote(names: Sequence[str | None], incomplete: Sequence[bool] = ()) -> str:
    """A measure step's note: the result files it wrote, and which of them are incomplete."""
    note = "wrote " + ", ".join(f"measure-{name}.json" for name in names)
    short = [str(name) for name, bad in zip(names, incomplete, strict=False) if bad]
    return f"{note}; incomplete: {', '.join(short)}" if short else note


def _measured(run_dir: Path, name: str) -> bool:
    """A whole result file exists for this visit (files are written atomically)."""
    path = result_path(run_dir, name)
    if not path.is_file():
        return False
    try:
        load_result(path)
    except UserError:
        return False
    return True


# --------------------------------------------------------------------------- the run


ReportWriter = Callable[[Path], Sequence[object]]  # a run folder -> the files written


def execute(
    prepared: Prepared,
    events: RunEvents | None = None,
    stop: StopFlag | None = None,
    *,
    write_report: ReportWriter,
    poll_s: float = DEFAULT_POLL_S,
) -> RunOutcome:
    """Run every step not yet done; whatever happens, leave nothing the run made billing
    (unless `Abandoned`, when the outcome says what is left). `write_report` is the report
    step's writer (`sagemeter.report.writer.write_report`)."""
    with run_lock(prepared.run_dir):
        run = _Run(prepared, events or RunEvents(), stop or StopFlag(), poll_s, write_report)
        return run.run()


class _Run:
    def __init__(
        self,
        prepared: Prepared,
        events: RunEvents,
        stop: StopFlag,
        poll_s: float,
        write_report: ReportWriter,
    ):
        self.plan = prepared.plan
        self.run_dir = prepared.run_dir
        self.journal = prepared.journal
        self.checked = prepared.checked
        self.prices = prepared.estimate.prices if prepared.estimate else {}
        self.events = events
        self.stop = stop
        self.poll_s = poll_s
        self.write_report = write_report
        self.steps = plan_steps(self.plan)
        self.settings = self.plan.settings()
        self.requests = total_requests(
            self.settings, len(selected_questions(self.settings).questions)
        )
        self.comparison: Comparison | None = None

    def save(self) -> None:
        self.journal.save(self.run_dir)

    # ------------------------------------------------------------------ the loop

    def run(self) -> RunOutcome:
        journal = self.journal
        # The steps the session before failed at: failing there again is no news to resume.
        failed_before = {s.index for s in journal.steps if s.state == "failed"}
        before = journal.stopped_because if journal.state == "failed" else None
        same_failure = False
        journal.state, journal.stopped_because = "running", None
        journal.sessions.append(this_session())
        self.save()
        kind: StopKind | None = None
        abandoned = False
        bug: BaseException | None = None
        try:
            try:
                with self._cap_watch():
                    for spec, record in zip(self.steps, journal.steps, strict=True):
                        self.stop.check()
                        self._step(spec, record)
                journal.state = "done"
            except Abandoned:
                raise
            except KeyboardInterrupt:  # Stopped, a cancelled MCP call, or a bare Ctrl-C
                kind = self.stop.kind or "signal"
                journal.state = "stopped"
                journal.stopped_because = self.stop.reason or "interrupted"
                self._end_running_step("stopped", None)
                if kind != "signal":  # a signal's handler has said so already
                    self.events.note(f"stopping: {journal.stopped_because}")
                self._teardown()
            except Exception as exc:
                message = _one_line(exc)
                step = self._end_running_step("failed", message)
                journal.state = "failed"
                journal.stopped_because = f"{step.label if step else 'the run'} failed: {message}"
                same_failure = before == journal.stopped_because or (
                    step is not None and step.index in failed_before
                )
                self.save()
                self.events.note(f"stopping: {journal.stopped_because}")
                self._teardown()
                if not isinstance(exc, UserError):
                    bug = exc
        except Abandoned as exc:
            abandoned = True
            kind = kind or self.stop.kind or "signal"
            self._end_running_step("stopped", None)
            journal.state = "stopped"
            why = journal.stopped_because or self.stop.reason or str(exc) or "interrupted"
            journal.stopped_because = f"{why}; asked again: the rest is left to --resume"
        finally:
            session = journal.sessions[-1]
            session.ended_utc = utc_now()
            session.outcome = journal.state
            self.save()
        if bug is not None:
            raise bug
        cost, _ = journal.cost()
        return RunOutcome(
            run_dir=str(self.run_dir),
            state=journal.state,
            stop_kind=kind,
            stopped_because=journal.stopped_because,
            comparison=self.comparison,
            cost_usd=round(cost, 4),
            cost_note=journal.cost_note,
            left_running=[d for d in journal.deployments if d.may_exist],
            incomplete=list(journal.incomplete),
            abandoned=abandoned,
            same_failure=same_failure,
            journal=journal,
        )

    def _cap_watch(self) -> CapWatch | _NoWatch:
        cap = self.plan.max_cost_usd
        if cap is None:
            return _NoWatch()
        return CapWatch(cap, lambda: self.journal.cost()[0], self.stop)

    def _end_running_step(self, state: str, note: str | None) -> StepRecord | None:
        """Mark the step in progress stopped or failed, save, and tell the face."""
        for record in self.journal.steps:
            if record.state == "running":
                record.state = state  # type: ignore[assignment]
                record.note = note or record.note
                self._finish_times(record)
                self.save()
                self.events.step_finished(record, self.journal)
                return record
        return None

    def _begin(self, record: StepRecord) -> None:
        record.state, record.note = "running", None
        record.started_utc, record.ended_utc, record.elapsed_s = utc_now(), None, None
        self.save()
        self.events.step_started(record, self.journal)

    def _done(self, record: StepRecord, note: str | None = None, incomplete: bool = False) -> None:
        record.state, record.note = ("incomplete" if incomplete else "done"), note
        self._finish_times(record)
        self.save()
        self.events.step_finished(record, self.journal)

    def _skip(self, record: StepRecord, note: str) -> None:
        if record.state not in ("done", "incomplete"):
            record.state, record.note = "skipped", note
            self.save()
        self.events.step_finished(record, self.journal)

    @staticmethod
    def _finish_times(record: StepRecord) -> None:
        record.ended_utc = utc_now()
        if record.started_utc:
            elapsed = parse_utc(record.ended_utc) - parse_utc(record.started_utc)
            record.elapsed_s = round(elapsed.total_seconds(), 1)

    def _step(self, spec: StepSpec, record: StepRecord) -> None:
        if spec.kind == "deploy":
            visit = spec.visits[0]
            if _measured(self.run_dir, visit.result_name):
                self._skip(record, f"not needed: {visit.result_name} is measured")
                return
            self._begin(record)
            deployment = self._ensure_live(visit)
            assert visit.arm.platform is not None
            live = platform_of(visit.arm.platform).facts(visit.arm).live
            self._done(record, _placed_note(deployment, live))
        elif spec.kind == "measure":
            todo = [v for v in spec.visits if not _measured(self.run_dir, v.result_name)]
            if not todo and record.state in ("running", "stopped"):
                # The session before wrote every file, then was killed or stopped before it said so.
                self._done(record, *self._adopt_results(spec.visits, record))
                return
            if not todo:
                self._skip(record, "measured before; the result file is kept as it is")
                return
            self._adopt_earlier(spec.visits, todo)
            self._begin(record)
            self._done(record, *self._measure(todo))
        elif spec.kind == "delete":
            made = self.journal.deployment(spec.visits[0].result_name)
            if made is None or not made.may_exist:
                self._skip(record, "nothing to delete")
                return
            self._begin(record)
            self._delete(made)
            self._done(record, f"deleted {made.target}")
        elif spec.kind == "combine":
            saved = self.run_dir / COMPARE_FILE
            kept = _saved_comparison(saved) if record.state == "done" else None
            if kept is not None:  # a damaged or replaced compare.json is combined again
                self.comparison = kept
                self._skip(record, "done before")
                return
            self._begin(record)
            self._done(record, self._combine())
        else:
            if record.state == "done" and (self.run_dir / "report.md").is_file():
                self._skip(record, "done before")
                return
            self._begin(record)
            written = self.write_report(self.run_dir)
            self._done(record, f"wrote {len(written)} files")

    # ------------------------------------------------------------------ measuring

    def _target(self, visit: Visit) -> Target:
        if visit.arm.deployed:
            deployment = self.journal.deployment(visit.result_name)
            if deployment is None or deployment.state != "live":
                raise UserError(f"{visit.result_name}: its endpoint is not live")
            return platform_of(deployment.platform).target(deployment)
        return arm_target(visit.arm, self.journal.plan_folder)

    def _fidelity_reference(self, visit: Visit) -> FidelityRecord | None:
        """With fidelity on, every visit after the first is forced along the first's answers."""
        first = visits(self.plan)[0]
        if self.settings.fidelity_prompts <= 0 or visit.result_name == first.result_name:
            return None
        result = load_result(result_path(self.run_dir, first.result_name))
        return result.detail.fidelity if result.detail else None

    def _adopt_results(self, done: Sequence[Visit], record: StepRecord) -> tuple[str, bool]:
        """Take the result files an interrupted session finished as this step's own; the note,
        and whether one of them is incomplete. A file measured since the step began joins the
        time order of measurements (`measured`), as a fresh measure step's do."""
        names = [visit.result_name for visit in done]
        results = [load_result(result_path(self.run_dir, name)) for name in names]
        for name in names:
            path = result_path(self.run_dir, name)
            if name not in self.journal.measured or started_since(path, record.started_utc):
                self.journal.measured.append(name)
            self._keep_digest(name)
        short = [self._note_incomplete(n, r) for n, r in zip(names, results, strict=True)]
        return _wrote(names, short), any(short)

    def _adopt_earlier(self, visits: Sequence[Visit], todo: Sequence[Visit]) -> None:
        """The step's visits a session before finished before it was cut (an interleaved step
        stopped during its second arm): their files join the journal's digests and time order
        before this session measures the rest, so a later resume knows them as the run's own."""
        left = {visit.result_name for visit in todo}
        for visit in visits:
            name = visit.result_name
            if name in left or not _measured(self.run_dir, name):
                continue
            if name not in self.journal.measured:
                self.journal.measured.append(name)
            if self.journal.results is not None and name not in self.journal.results:
                self._keep_digest(name)

    def _keep_digest(self, name: str) -> None:
        """The journal keeps each result file's sha256 as written (resume checks it)."""
        if self.journal.results is not None:
            self.journal.results[name] = sha256_of(result_path(self.run_dir, name))

    def _note_incomplete(self, name: str | None, result: MeasureResult) -> bool:
        """The journal keeps why a result is incomplete (one line per result, the newest)."""
        prefix = f"{name}: "
        self.journal.incomplete = [
            line for line in self.journal.incomplete if not line.startswith(prefix)
        ]
        if result.complete is False:
            why = "; ".join(result.incomplete_because) or "a figure is missing"
            self.journal.incomplete.append(prefix + why)
            return True
        return False

    def _measure(self, todo: list[Visit]) -> tuple[str, bool]:
        targets = {visit.result_name: self._target(visit) for visit in todo}
        references = {visit.result_name: self._fidelity_reference(visit) for visit in todo}
        turns = Turns([visit.result_name for visit in todo]) if len(todo) > 1 else None
        looks = self._quality_stop(todo, turns)
        with batches_on_ray(self.plan.measure.ray):
            measuring = self._measure_async(todo, targets, references, turns, looks)
            results = signal_wakeup.run(measuring)
        if results is None:
            raise Stopped(self.stop.reason or "stopped")
        self.journal.measured.extend(visit.result_name for visit in todo)
        for visit in todo:
            self._keep_digest(visit.result_name)
        short = [self._note_incomplete(result.name, result) for result in results]
        wrote = _wrote([result.name for result in results], short)
        if turns is None:
            return wrote, any(short)
        wrote = f"{wrote}; {len(turns.log)} requests and batches sent in turn"
        record = looks.record() if looks is not None else None
        if record is not None:
            wrote += f"; quality {record.verdict}, {record.sentence}"
        return wrote, any(short)

    def _quality_stop(self, todo: list[Visit], turns: Turns | None) -> QualityStop | None:
        """The sequential stop both interleaved arms share (`[stop] quality = "decided"`)."""
        if self.plan.stop.quality != "decided" or len(todo) != 2:
            return None
        return QualityStop(
            todo[0].result_name,
            todo[1].result_name,
            len(selected_questions(self.settings).questions),
            self.plan.stop.block,
            self.settings.margin_points,
            turns,
        )

    async def _measure_async(
        self,
        todo: list[Visit],
        targets: dict[str, Target],
        references: dict[str, FidelityRecord | None],
        turns: Turns | None,
        looks: QualityStop | None = None,
    ) -> list[MeasureResult] | None:
        """Every visit measured (at once, taking turns, when several); None when stopped."""

        async def one(visit: Visit) -> MeasureResult:
            name = visit.result_name
            advance, on_phase = self.events.measuring(name, self.requests)
            target = targets[name]
            wrap: Callable[[ChatClient], ChatClient] | None = None
            if turns is not None:
                member = name

                def wrap(client: ChatClient) -> ChatClient:
                    return TakingTurns(client, turns, member)

            try:
                result, _ = await measure_target(
                    target,
                    name=name,
                    settings=self.settings,
                    out_dir=self.run_dir,
                    progress=advance,
                    on_phase=on_phase,
                    fidelity_reference=references[name],
                    api_key=_api_key(target),
                    wrap_client=wrap,
                    slo=self.plan.slo,
                    price_per_hour=self._price_of(visit),
                    quality_looks=looks.arm(name) if looks is not None else None,
                    predicted_decode=(
                        platform_of(visit.arm.platform).facts(visit.arm).predicted_decode
                        if visit.arm.platform is not None
                        else None
                    ),
                )
            finally:
                if looks is not None:
                    await looks.leave(name)
                if turns is not None:
                    await turns.leave(name)
            return result

        tasks = [asyncio.create_task(one(visit)) for visit in todo]
        watcher = asyncio.create_task(self._cancel_on_stop(tasks))
        try:
            return list(await asyncio.gather(*tasks))
        except asyncio.CancelledError:
            if self.stop.requested:
                return None
            raise
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            watcher.cancel()

    def _price_of(self, visit: Visit) -> float | None:
        """An arm's hourly price for its cost at the SLO: the plan's, else what its deployment
        was priced at."""
        if self.plan.price_per_hour is not None:
            return self.plan.price_per_hour
        deployment = self.journal.deployment(visit.result_name)
        if deployment is None or deployment.hourly_usd is None:
            return None
        return deployment.hourly_usd * deployment.count

    def _deployed_price(self, names: Sequence[str]) -> tuple[float, str] | None:
        """The hourly price every one of these visits' deployments was billed at (price x
        count), when all were deployed and priced alike, with the line that says so."""
        found = [self.journal.deployment(name) for name in names]
        prices = {
            d.hourly_usd * d.count for d in found if d is not None and d.hourly_usd is not None
        }
        if len(prices) != 1 or any(d is None or d.hourly_usd is None for d in found):
            return None
        (usd,) = prices
        platforms = ", ".join(sorted({d.platform for d in found if d is not None}))
        return usd, f"cost rows at ${usd:g} per hour, the price {platforms} billed (the journal's)"

    async def _cancel_on_stop(self, tasks: list[asyncio.Task[MeasureResult]]) -> None:
        while not self.stop.requested:
            await asyncio.sleep(STOP_POLL_S)
        for task in tasks:
            task.cancel()

    def _combine(self) -> str:
        names = combine_order(self.plan)
        paths = [result_path(self.run_dir, name) for name in names]
        last = {name: index for index, name in enumerate(self.journal.measured)}
        # The journal's time order (each file at its last measurement) decides A-A' drift.
        known = None if self.plan.interleaved or not all(n in last for n in names) else last
        time_order = sorted(names, key=known.__getitem__) if known is not None else None
        comparison = combine(paths, price_per_hour=self.plan.price_per_hour, time_order=time_order)
        deployed = self._deployed_price(names)
        if (
            comparison.price_per_hour is None
            and deployed is not None
            and recorded_price(paths, [load_result(path) for path in paths]) == (None, [])
        ):
            # No price given and no result records one: the one the platform billed.
            usd, billed = deployed
            comparison = combine(paths, price_per_hour=usd, time_order=time_order)
            comparison.warnings.append(billed)
        order, note = measured_order(self.plan, self.journal.measured)
        comparison = comparison.model_copy(update={"order": order, "order_note": note})
        save_comparison(comparison, self.run_dir / COMPARE_FILE)
        self.comparison = comparison
        return f"wrote {COMPARE_FILE} ({' → '.join(comparison.names)})"

    # ------------------------------------------------------------------ the platforms

    def _progress(self, progress: Any) -> None:
        """Deploys and waits stop at their next poll once a stop is asked for."""
        self.stop.check()
        self.events.cloud(progress)

    def _hooks(self, *, stoppable: bool = True) -> Hooks:
        """A deploy or adopt stops at its next poll once a stop is asked for; a delete (the
        teardown after a stop too) goes on to the end."""
        return Hooks(
            save=self.save,
            progress=self._progress if stoppable else self.events.cloud,
            note=self.events.note,
            deleted=self.events.deleted,
            poll_s=self.poll_s,
            price_per_hour=self.plan.price_per_hour,
        )

    def _platform(self, name: str) -> tuple[Platform, object]:
        """A deployment's platform, and what its check found (checked now when the run did
        not: a journal naming a platform the plan no longer deploys on)."""
        platform = platform_of(name)
        if name not in self.checked:
            arms = [arm for arm in self.plan.arms if arm.platform == name]
            self.checked[name] = platform.check(self.plan, arms, fresh=False, need_credentials=True)
        return platform, self.checked[name]

    def _ensure_live(self, visit: Visit) -> Deployment:
        """The visit's endpoint live: one left from before (adopted by its platform), else a
        new deploy."""
        deployment = self.journal.deployment(visit.result_name)
        if deployment is not None and deployment.may_exist:
            platform, checked = self._platform(deployment.platform)
            if platform.adopt(checked, deployment, self._hooks()):
                live = platform.facts(visit.arm).live
                deployment.state, deployment.live_utc = "live", deployment.live_utc or utc_now()
                deployment.note = f"found {live} from before the interruption: used"
                self.save()
                self.events.note(f"{deployment.target} is {live} from before: measuring it")
                return deployment
            self._delete(deployment)
        return self._deploy(visit)

    def _deploy(self, visit: Visit) -> Deployment:
        arm = visit.arm
        assert arm.platform is not None
        platform, checked = self._platform(arm.platform)
        deployment = platform.deployment(checked, arm, visit.result_name)
        estimated = self.prices.get(arm.name)
        if estimated is not None:
            deployment.hourly_usd = estimated.usd_per_hour
            deployment.price_note = f"the estimate until placed: {estimated.note}"
        self.journal.deployments.append(deployment)
        self.save()  # before the first create call: a kill now leaves a deployment to look for
        try:
            platform.deploy(checked, deployment, self._hooks())
        except UserError as exc:
            if deployment.state != "failed":
                deployment.state, deployment.note = "failed", str(exc)
            self.save()
            raise
        deployment.state, deployment.live_utc = "live", utc_now()
        self.save()
        return deployment

    def _delete(self, deployment: Deployment) -> None:
        """Delete what this deployment left, waiting out a start first (its platform does)."""
        deployment.state = "deleting"
        self.save()
        platform, checked = self._platform(deployment.platform)
        platform.delete(checked, deployment, self._hooks(stoppable=False))
        deployment.state, deployment.deleted_utc = "deleted", utc_now()
        self.save()

    def _teardown(self) -> None:
        """Delete every deployment of the run that may still exist; each failure is said and
        the rest still go."""
        left = self.journal.live_deployments()
        if not left:
            return
        self.events.note(
            "deleting everything this run created: " + ", ".join(d.target for d in left)
        )
        for deployment in left:
            try:
                self._delete(deployment)
            except UserError as exc:
                deployment.note = f"could not be deleted: {_one_line(exc)}"
                self.save()
                self.events.note(f"could not delete {deployment.target}: {_one_line(exc)}")


class _NoWatch:
    def __enter__(self) -> _NoWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _check_env_key(plan: Plan) -> None:
    """OPENAI_API_KEY, when an arm is a hosted endpoint that will be sent it: checked once,
    before any arm runs (a key holding CR/LF is refused, not sent)."""
    for arm in plan.arms:
        try:
            target = arm.parsed_target() if arm.target is not None else None
        except UserError:
            continue  # said under the arm's own name
        if isinstance(target, OpenAITarget):
            _api_key(target)
            return


def _api_key(target: Target) -> str | None:
    """A hosted OpenAI-compatible endpoint's key, from the environment as `measure` takes it."""
    if isinstance(target, OpenAITarget):
        key = os.environ.get("OPENAI_API_KEY") or None
        check_api_key(key, "OPENAI_API_KEY")
        return key
    return None


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def _placed_note(deployment: Deployment, live: str) -> str:
    price = (
        f", ${deployment.hourly_usd:,.4f}/h per instance"
        if deployment.hourly_usd is not None
        else ", no price"
    )
    before = f"; before: {'; '.join(deployment.attempts)}" if deployment.attempts else ""
    return (
        f"{live} as {deployment.target} ({deployment.instance_type or '?'} "
        f"x{deployment.count}{price}){before}"
    )


def left_running_lines(outcome: RunOutcome) -> list[str]:
    """What may still run after an abandoned or incomplete teardown, and what it costs."""
    lines = []
    for deployment in outcome.left_running:
        price = (
            f"${deployment.hourly_usd * deployment.count:,.4f}/h"
            if deployment.hourly_usd is not None
            else "price unknown"
        )
        cost = deployment.cost_usd()
        spent = f", ${cost:,.2f} so far" if cost is not None else ""
        lines.append(
            f"{deployment.target} ({deployment.state}, "
            f"{deployment.instance_type or '?'} x{deployment.count}, {price}{spent})"
        )
    return lines


def resume_hint(outcome: RunOutcome) -> str:
    deletes = " or ".join(_delete_hint(d) for d in outcome.left_running)
    tail = f", or {deletes}" if deletes else ""
    return f"`sagemeter run --resume {outcome.run_dir}`{tail}"


def _delete_hint(deployment: Deployment) -> str:
    """How a person deletes a deployment a run left, as its platform says (when it loads)."""
    try:
        return platform_of(deployment.platform).left_running(deployment)
    except UserError:
        return f"deleting {deployment.target} on {deployment.platform}"


def _saved_comparison(path: Path) -> Comparison | None:
    """The comparison a finished combine step wrote, or None when it is gone or unreadable."""
    payload = probe_json(path)
    if payload is None:
        return None
    try:
        return Comparison.model_validate(payload)
    except ValidationError:
        return None
