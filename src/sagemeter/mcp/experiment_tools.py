"""run_experiment: `sagemeter run` for an assistant, into the server's results folder.

The plan comes as TOML text, or as a plan file in the results folder (never a path elsewhere);
the files it names (its question file, local checkpoints) follow `names`: by name, from the
results folder, checked before anything is read. Its run folder is `runs/DATE-NAME` under the
results folder, and `resume` names one of those. A plan that deploys SageMaker endpoints needs
--allow-write (a dry run does not). Progress notifications follow every step and request. A
cancelled call stops the run as Ctrl-C does: the step in progress ends and everything the run
created is deleted, in the background if that outlasts the call; the journal and
`list_endpoints` show what remains until then.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import threading
from pathlib import Path
from typing import Annotated, Any

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from sagemeter import sagemaker as sm
from sagemeter.errors import UserError
from sagemeter.experiment import (
    Estimate,
    Journal,
    Plan,
    Prepared,
    RunEvents,
    RunOutcome,
    StepRecord,
    StopFlag,
    check_ready,
    default_run_dir,
    estimate,
    execute,
    finished_line,
    left_running_lines,
    load_plan,
    parse_plan,
    resume_hint,
    resume_run,
    start_run,
)
from sagemeter.experiment.runner import check_cap
from sagemeter.mcp import names
from sagemeter.mcp.config import ServerConfig
from sagemeter.mcp.guard import guarded, reply, require_write
from sagemeter.mcp.progress import Relay
from sagemeter.mcp.server_tools import ServerTools
from sagemeter.measure import ProgressFn
from sagemeter.measure.workflow import PhaseFn
from sagemeter.options.faces import read_options, with_options
from sagemeter.options.run import RUN, RunOptions
from sagemeter.printable import SafeConsole

RUNS = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)
GRACE_S = 30.0  # how long a cancelled call waits for the run to stop and clean up in view
RUNS_DIR = "runs"


class ExperimentAnswer(BaseModel):
    run_dir: str | None = Field(None, description="the run folder (for resume: its name)")
    dry_run: bool = False
    state: str = Field(description="planned (dry run), done, stopped or failed")
    stopped_because: str | None = None
    steps: list[StepRecord] = Field(default_factory=list)
    estimate: Estimate | None = Field(None, description="dry run: steps, time, cost, prices")
    problem: str | None = Field(None, description="dry run: what would stop the run at its start")
    cost_usd: float | None = Field(
        None, description="what the run cost so far, counted as in its journal"
    )
    left_running: list[str] = Field(
        default_factory=list, description="endpoints that may still bill, with their price"
    )
    incomplete: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list, description="what the run folder holds")


class _Ticks:
    """Progress notifications from the run's thread, in order, each one a step further."""

    def __init__(self, relay: Relay, loop: asyncio.AbstractEventLoop) -> None:
        self.relay = relay
        self.loop = loop
        self.count = 0

    def post(self, message: str) -> None:
        self.count += 1
        # After a cancelled call the run may go on deleting; nobody listens then.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.relay.post, self.count, None, message)

    def events(self) -> RunEvents:
        def finished(record: StepRecord, journal: Journal) -> None:
            money = f", {journal.cost_so_far()}"
            note = f": {record.note}" if record.note else ""
            self.post(
                f"[{record.index}/{len(journal.steps)}] {record.label} {record.state} "
                f"({record.elapsed_s or 0:.1f} s{money}){note}"
            )

        def measuring(name: str, total: int) -> tuple[ProgressFn, PhaseFn]:
            done = [0]
            current = ["starting"]

            def advance(count: int) -> None:
                done[0] += count
                self.post(f"{name}: {current[0]} {done[0]}/{total} requests")

            def phase(text: str) -> None:
                current[0] = text

            return advance, phase

        def cloud(progress: sm.Progress | str) -> None:
            if isinstance(progress, str):  # a plug-in platform's news, one line
                self.post(progress)
                return
            status = f" {progress.status}" if progress.status else ""
            self.post(
                f"{progress.name}@{progress.region} {progress.phase}{status}, "
                f"{progress.elapsed_s / 60:.1f} min"
            )

        return RunEvents(
            step_started=lambda record, journal: self.post(
                f"[{record.index}/{len(journal.steps)}] {record.label} …"
            ),
            step_finished=finished,
            measuring=measuring,
            cloud=cloud,
            note=self.post,
            deleted=lambda report: self.post(
                report
                if isinstance(report, str)  # a plug-in platform's report, one line
                else f"{report.name}@{report.region}: "
                + ", ".join(f"{step.kind} {step.outcome}" for step in report.steps)
            ),
        )


def _estimate_text(plan: Plan, planned: Estimate, run_dir: Path) -> str:
    lines = [
        f"plan {plan.name}: {len(plan.arms)} arms, order {plan.order_text}, into {run_dir}",
        *(
            f"{row.index}. {row.label}: {row.creates}, about {row.minutes:.1f} min"
            + (f", ${row.usd:,.2f}" if row.usd is not None else "")
            for row in planned.steps
        ),
        f"total: about {planned.minutes:.0f} min, about ${planned.usd:,.2f}"
        + (f" + {', '.join(planned.unpriced)} at an unknown price" if planned.unpriced else ""),
        f"assumptions: {planned.assumptions}",
        "nothing was created",
    ]
    return "\n".join(lines)


def _outcome_text(outcome: RunOutcome) -> str:
    lines = [
        f"[{step.index}] {step.label}: {step.state}" + (f" ({step.note})" if step.note else "")
        for step in outcome.journal.steps
    ]
    if outcome.comparison is not None:
        from sagemeter.report.terminal import print_comparison

        buffer = io.StringIO()
        print_comparison(SafeConsole(file=buffer, width=120, color_system=None), outcome.comparison)
        lines.append(buffer.getvalue().rstrip())
    if outcome.state == "done":
        lines.append(f"wrote {outcome.run_dir} (report.md, report.html, compare.json)")
    else:
        lines.append(f"{outcome.state}: {outcome.stopped_because}")
        if outcome.left_running:
            lines.append("still running: " + "; ".join(left_running_lines(outcome)))
        if outcome.same_failure:
            lines.append("the session before failed at this step too: a resume as is repeats it; "
                         "fix what it says first")  # fmt: skip
        lines.append(f"continue with run_experiment resume={Path(outcome.run_dir).name}, or "
                     f"{resume_hint(outcome)}")  # fmt: skip
    if outcome.journal.deployments or outcome.journal.price_per_hour is not None:
        lines.append(f"cost so far: about ${outcome.cost_usd:,.2f}")
    if outcome.incomplete:
        lines.append(f"incomplete: {'; '.join(outcome.incomplete)}")
    return "\n".join(lines)


def register_experiment_tools(server: ServerTools, config: ServerConfig) -> None:
    """Add run_experiment to `server`."""

    @server.tool(title="Run an experiment (A-B-A, resumable)", annotations=RUNS)
    @guarded
    @with_options(RUN, "mcp")  # dry_run, max_cost_usd: run's options model
    async def run_experiment(
        ctx: Context[Any, Any],
        plan: Annotated[
            str | None,
            Field(
                description="the plan as TOML text: name, order (ABA by default, or "
                "interleaved), price_per_hour, max_cost_usd, [measure], and two or more [[arm]] "
                'each with target = "local:…|vllm:…|cmd:…|http://…|NAME@REGION" (local:, vllm: '
                "and cmd: (needs --allow-commands) servers started per visit) or an "
                "[arm.sagemaker] table (model, instance_type, "
                "region, fallback_regions, env); [measure] ray = ADDRESS sends batches from a "
                'Ray cluster; [stop] quality = "decided" (with order = "interleaved", two arms: '
                "stop at the first PASS or FAIL of a sequential test), speed = 0.03, "
                "max_repeats, max_batches, max_minutes"
            ),
        ] = None,
        plan_file: Annotated[
            str | None, Field(description="a plan file in the results folder, by its name")
        ] = None,
        resume: Annotated[
            str | None,
            Field(description="continue an interrupted run: its folder's name under runs/"),
        ] = None,
        **options: Any,
    ) -> Annotated[CallToolResult, ExperimentAnswer]:
        """Run a whole comparison: for each arm in order, deploy (SageMaker arms), measure,
        delete; then compare and write the report. A journal makes it resumable, and a stop,
        failure or the spend cap deletes everything the run created."""
        (given,) = read_options(RUN, options, "mcp")
        assert isinstance(given, RunOptions)
        dry_run, max_cost_usd = given.dry_run, given.max_cost_usd
        if sum(1 for value in (plan, plan_file, resume) if value) != 1:
            raise UserError("give exactly one of plan (TOML text), plan_file or resume")
        if max_cost_usd is not None and resume is None:
            raise UserError("max_cost_usd goes with resume; in a new run, set it in the plan")
        runs = names.runs_folder(config, RUNS_DIR)
        writes = "deploys SageMaker endpoints (they bill per hour)"
        if resume is not None:
            run_dir = names.run_folder(config, RUNS_DIR, resume)
            source = f"{RUNS_DIR}/{resume}"
            prepared = await anyio.to_thread.run_sync(
                lambda: resume_run(
                    run_dir,
                    max_cost_usd=max_cost_usd,
                    vet=lambda given: names.plan(config, given, source, resumed=True),
                )
            )
            if dry_run:
                assert prepared.estimate is not None
                answer = ExperimentAnswer(run_dir=str(run_dir), dry_run=True, state="planned",
                                          estimate=prepared.estimate)  # fmt: skip
                return reply(_estimate_text(prepared.plan, prepared.estimate, run_dir), answer)
            if prepared.journal.state == "done":  # nothing to resume: said, nothing run again
                journal = prepared.journal
                answer = ExperimentAnswer(run_dir=str(run_dir), state="done", steps=journal.steps,
                                          incomplete=journal.incomplete)  # fmt: skip
                return reply(finished_line(Path(source), journal), answer)
            if any(arm.deployed for arm in prepared.plan.arms):
                require_write(config, "run_experiment", writes)
        else:
            if plan_file is not None:
                path = names.plan_file(config, plan_file)
                parsed, text = load_plan(path, ready=False)
            else:
                assert plan is not None
                parsed, text = parse_plan(plan, "plan"), plan
            # Before anything the plan names is read: its files only by name, from the folder.
            parsed = names.plan(config, parsed, plan_file or "plan")
            if dry_run:
                return await anyio.to_thread.run_sync(lambda: _dry_run(parsed, runs))
            if any(arm.deployed for arm in parsed.arms):
                require_write(config, "run_experiment", writes)
            source = plan_file or "plan given to run_experiment"
            prepared = await anyio.to_thread.run_sync(
                lambda: start_run(
                    parsed,
                    out=default_run_dir(parsed.name, runs),
                    plan_text=text,
                    plan_source=source,
                    plan_folder=config.results_dir,
                )
            )
        outcome = await _execute(ctx, prepared)
        answer = ExperimentAnswer(
            run_dir=str(outcome.run_dir),
            state=outcome.state,
            stopped_because=outcome.stopped_because,
            steps=outcome.journal.steps,
            cost_usd=outcome.cost_usd if outcome.journal.deployments else None,
            left_running=left_running_lines(outcome),
            incomplete=outcome.incomplete,
            files=sorted(p.name for p in Path(outcome.run_dir).iterdir() if p.is_file()),
        )
        return reply(_outcome_text(outcome), answer)

    def _dry_run(parsed: Plan, runs: Path) -> CallToolResult:
        checked = check_ready(parsed, fresh=True, need_credentials=False)
        planned = estimate(parsed, checked)
        problem = None
        try:
            check_cap(parsed, planned)
        except UserError as exc:
            problem = str(exc)
        run_dir = default_run_dir(parsed.name, runs)
        answer = ExperimentAnswer(run_dir=str(run_dir), dry_run=True, state="planned",
                                  estimate=planned, problem=problem)  # fmt: skip
        text = _estimate_text(parsed, planned, run_dir)
        return reply(text + (f"\na run would stop here: {problem}" if problem else ""), answer)

    async def _execute(ctx: Context[Any, Any], prepared: Prepared) -> RunOutcome:
        from sagemeter.report.writer import write_report  # the run's report step

        stop = StopFlag()
        async with Relay(ctx) as relay:
            ticks = _Ticks(relay, asyncio.get_running_loop())
            ticks.post(f"run {prepared.plan.name} into {prepared.run_dir}")
            finished = threading.Event()

            def work() -> RunOutcome:
                try:
                    return execute(
                        prepared,
                        ticks.events(),
                        stop,
                        write_report=write_report,
                        poll_s=config.poll_s,
                    )
                finally:
                    finished.set()

            try:
                return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
            except anyio.get_cancelled_exc_class():
                stop.request("the MCP request was cancelled", "cancelled")
                with anyio.CancelScope(shield=True), anyio.move_on_after(GRACE_S):
                    while not finished.is_set():
                        await anyio.sleep(0.05)
                raise
