"""The run's journal: `journal.json` in the run folder, rewritten atomically before and after
every step that creates, measures or deletes.

It holds the plan, every step with its state, and every endpoint the run deployed (where it was
placed, its price, when it was created and deleted). A `kill -9` at any moment leaves the last
whole journal: `sagemeter run --resume DIR` reads it, finds what the run created and either
uses it or deletes it, and never measures a measured arm again. (The SageMaker resources
themselves are also in the local record `sagemeter sagemaker list` reads, written before each
create.) A deployment's fields are every platform's, plus the platform's own `record`.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, Field, ValidationError

from sagemeter.atomic import refuse_special, write_text_atomic
from sagemeter.errors import UserError
from sagemeter.experiment.steps import StepKind
from sagemeter.platforms.deployment import Deployment, parse_utc, utc_now
from sagemeter.textfiles import read_json

JOURNAL_FILE = "journal.json"
PLAN_FILE = "plan.toml"
LOCK_FILE = ".journal.lock"
SCHEMA = "sagemeter-experiment-journal/2"
# Journals written before deployments were any platform's (read, never written).
READ_SCHEMAS = (SCHEMA, "sagemeter-experiment-journal/1")

# "incomplete": a measure step that ended with a result missing a figure (`complete: false`);
# finished like "done" (never measured again), but said so.
StepState = Literal["pending", "running", "done", "incomplete", "skipped", "failed", "stopped"]
FINISHED_STEPS = ("done", "incomplete", "skipped")
RunState = Literal["running", "done", "stopped", "failed"]


class StepRecord(BaseModel):
    index: int = Field(description="1-based place in the run")
    kind: StepKind
    label: str
    results: list[str] = Field(default_factory=list, description="the visits it is about")
    state: StepState = "pending"
    started_utc: str | None = None
    ended_utc: str | None = None
    elapsed_s: float | None = None
    note: str | None = None


class FrozenInput(BaseModel):
    """An input file the run read, as it was when the run started (resume checks it)."""

    key: str = Field(description="the plan key that names it, e.g. measure.questions")
    path: str = Field(description="absolute, resolved once at the start")
    sha256: str


class Session(BaseModel):
    """One process that worked on the run (the first, then each --resume)."""

    pid: int
    host: str
    started_utc: str = Field(default_factory=utc_now)
    ended_utc: str | None = None
    outcome: str | None = None


class Journal(BaseModel):
    schema_: str = Field(SCHEMA, alias="schema")
    name: str
    run_dir: str
    plan: dict[str, object] = Field(description="the plan as checked (keys canonical)")
    plan_source: str = Field(description="the plan file it came from, or 'built-in demo'")
    plan_sha256: str | None = Field(
        None, description="of the run folder's plan.toml as written at the start"
    )
    inputs: list[FrozenInput] = Field(
        default_factory=list, description="input files the plan names, with their sha256"
    )
    plan_folder: str | None = Field(
        None,
        description="the plan file's folder, absolute: what the plan's relative paths mean, "
        "and where a cmd: arm's command runs (on every resume too)",
    )
    results: dict[str, str] | None = Field(
        None,
        description="each result file the run wrote (by visit name) with its sha256: a resume "
        "refuses one changed since, or one the run did not write",
    )
    state: RunState = "running"
    stopped_because: str | None = None
    created_utc: str = Field(default_factory=utc_now)
    updated_utc: str = Field(default_factory=utc_now)
    cost_usd: float | None = Field(None, description="cost so far at the last write")
    cost_note: str | None = None
    max_cost_usd: float | None = None
    steps: list[StepRecord] = Field(default_factory=list)
    deployments: list[Deployment] = Field(default_factory=list)
    sessions: list[Session] = Field(default_factory=list)
    incomplete: list[str] = Field(default_factory=list, description="results missing a figure")
    measured: list[str] = Field(
        default_factory=list,
        description="result names in the time order they were measured (a visit measured "
        "again, e.g. on resume after its file was deleted, appears again)",
    )

    model_config = {"populate_by_name": True}

    def step(self, index: int) -> StepRecord:
        return self.steps[index - 1]

    def deployment(self, result: str) -> Deployment | None:
        """The newest deployment made for visit `result`."""
        found = [d for d in self.deployments if d.result == result]
        return found[-1] if found else None

    def live_deployments(self) -> list[Deployment]:
        return [d for d in self.deployments if d.may_exist]

    def cost(self, now: datetime | None = None) -> tuple[float, list[str]]:
        """(cost so far in USD, the endpoints whose price is unknown and so left out)."""
        total, unpriced = self.measuring_cost(now), []
        for deployment in self.deployments:
            cost = deployment.cost_usd(now)
            if cost is None:
                unpriced.append(deployment.target)
            else:
                total += cost
        return total, unpriced

    def cost_so_far(self) -> str:
        """The cost so far as every step line shows it (the CLI's and the MCP tool's)."""
        if not self.deployments and self.price_per_hour is None:
            return "cost not counted (no price_per_hour)"
        cost, unpriced = self.cost()
        more = " + unpriced" if unpriced else ""
        return f"${cost:,.2f}{more} so far"

    @property
    def price_per_hour(self) -> float | None:
        price = self.plan.get("price_per_hour")
        return float(price) if isinstance(price, int | float) else None

    def measuring_cost(self, now: datetime | None = None) -> float:
        """The arms the run does not deploy, at the plan's `price_per_hour` (0 without it) for
        the time they were measured: each such visit from its measure step's start to its end
        (or now). A deployed arm's hours are its deployment's, counted from deploy to delete."""
        price = self.price_per_hour
        if price is None:
            return 0.0
        deployed = {deployment.result for deployment in self.deployments}
        seconds = 0.0
        for step in self.steps:
            if step.kind != "measure" or step.started_utc is None:
                continue
            visits = sum(1 for result in step.results if result not in deployed)
            end = parse_utc(step.ended_utc) if step.ended_utc else (now or datetime.now(UTC))
            seconds += visits * max((end - parse_utc(step.started_utc)).total_seconds(), 0.0)
        return price * seconds / 3600.0

    def save(self, run_dir: Path) -> None:
        cost, unpriced = self.cost()
        self.cost_usd = round(cost, 4)
        self.cost_note = f"leaves out {', '.join(unpriced)} (no price known)" if unpriced else None
        self.updated_utc = utc_now()
        text = self.model_dump_json(indent=2, by_alias=True)
        write_text_atomic(run_dir / JOURNAL_FILE, text + "\n")


def this_session() -> Session:
    return Session(pid=os.getpid(), host=socket.gethostname())


def read_journal(run_dir: Path) -> Journal:
    """The journal of a run folder; a missing or damaged one is one UserError."""
    path = run_dir / JOURNAL_FILE
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: no such run folder")
    refuse_special(path, "the journal")  # a link leads elsewhere; a FIFO would block the read
    if not path.exists():
        raise UserError(f"{run_dir}: holds no {JOURNAL_FILE}; give the folder `sagemeter run` made")
    data = read_json(path)  # capped; a device in its place is one line, not a hang
    if not isinstance(data, dict) or data.get("schema") not in READ_SCHEMAS:
        raise UserError(f"{path}: not a sagemeter run journal ({SCHEMA})")
    try:
        return Journal.model_validate({**data, "schema": SCHEMA})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise UserError(f"{path}: {where}: {first['msg']}") from None


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold the run folder for this process: a second `run --resume` of it is refused while
    this one lives. The lock dies with the process, `kill -9` too."""
    import fcntl

    run_dir.mkdir(parents=True, exist_ok=True)
    handle: IO[str] = (run_dir / LOCK_FILE).open("a+")
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(
                f"{run_dir} is being run by another sagemeter process right now; wait for it, "
                "or stop it first"
            ) from None
        yield
    finally:
        handle.close()
