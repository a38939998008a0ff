"""Experiments: a plan (arms, order, settings, price, spend cap) run step by step with a journal,
resumable, deleting whatever it created. `sagemeter run`, `demo` and the MCP `run_experiment`
all go through here."""

from sagemeter.experiment.estimate import Estimate, StepEstimate, estimate
from sagemeter.experiment.frozen import freeze_paths
from sagemeter.experiment.journal import (
    FINISHED_STEPS,
    JOURNAL_FILE,
    PLAN_FILE,
    Journal,
    StepRecord,
    read_journal,
)
from sagemeter.experiment.plan import INTERLEAVED, Arm, Plan, load_plan, parse_plan, plan_from_data
from sagemeter.experiment.runner import (
    Prepared,
    RunEvents,
    RunOutcome,
    check_ready,
    default_run_dir,
    execute,
    finished_line,
    left_running_lines,
    resume_hint,
    resume_run,
    start_run,
)
from sagemeter.experiment.steps import StepSpec, Visit, combine_order, plan_steps, visits
from sagemeter.experiment.stop import Abandoned, StopFlag, Stopped
from sagemeter.platforms.deployment import Deployment

__all__ = [
    "FINISHED_STEPS",
    "INTERLEAVED",
    "JOURNAL_FILE",
    "PLAN_FILE",
    "Abandoned",
    "Arm",
    "Deployment",
    "Estimate",
    "Journal",
    "Plan",
    "Prepared",
    "RunEvents",
    "RunOutcome",
    "StepEstimate",
    "StepRecord",
    "StepSpec",
    "StopFlag",
    "Stopped",
    "Visit",
    "check_ready",
    "combine_order",
    "default_run_dir",
    "estimate",
    "execute",
    "finished_line",
    "freeze_paths",
    "left_running_lines",
    "load_plan",
    "parse_plan",
    "plan_from_data",
    "plan_steps",
    "read_journal",
    "resume_hint",
    "resume_run",
    "start_run",
    "visits",
]
