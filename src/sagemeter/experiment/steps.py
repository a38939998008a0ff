"""From a plan to its steps: which arm is measured when, under which result name, and what the
run must create and delete around each measurement.

In an A-B-A order each visit of an arm the run deploys is deploy → measure → delete, so only one
endpoint bills at a time. In the interleaved order every arm is live at once: all deploys, one
measuring step that alternates their requests, then all deletes. Then combine and report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # plan.py imports this module
    from sagemeter.experiment.plan import Arm, Plan


StepKind = Literal["deploy", "measure", "delete", "combine", "report"]


@dataclass(frozen=True)
class Visit:
    """One measurement of one arm: the first is `measure-ARM.json`, a repeat `ARM-again`."""

    arm: Arm
    occurrence: int  # 0 for the first measurement of this arm, 1 for its repeat, …
    position: int  # its place in the run order

    @property
    def result_name(self) -> str:
        return result_name(self.arm.name, self.occurrence)


def result_name(arm: str, occurrence: int) -> str:
    """`bf16`, `bf16-again`, `bf16-again-2`, …"""
    if occurrence == 0:
        return arm
    return f"{arm}-again" if occurrence == 1 else f"{arm}-again-{occurrence}"


@dataclass(frozen=True)
class StepSpec:
    kind: StepKind
    visits: tuple[Visit, ...] = ()

    @property
    def label(self) -> str:
        if self.kind in ("combine", "report"):
            return self.kind
        names = ", ".join(visit.result_name for visit in self.visits)
        if self.kind == "measure" and len(self.visits) > 1:
            return f"measure {names} (interleaved)"
        return f"{self.kind} {names}"


def visits(plan: Plan) -> list[Visit]:
    """Every measurement in run order (for interleaved: each arm once, in plan order)."""
    if plan.interleaved:
        return [Visit(arm=arm, occurrence=0, position=i) for i, arm in enumerate(plan.arms)]
    seen: dict[str, int] = {}
    found = []
    for position, letter in enumerate(plan.order_text):
        arm = plan.arms[ord(letter) - ord("A")]
        found.append(Visit(arm=arm, occurrence=seen.get(arm.name, 0), position=position))
        seen[arm.name] = seen.get(arm.name, 0) + 1
    return found


def plan_steps(plan: Plan) -> list[StepSpec]:
    """The steps in the order they run."""
    steps: list[StepSpec] = []
    every = visits(plan)
    if plan.interleaved:
        deployed = [visit for visit in every if visit.arm.deployed]
        steps += [StepSpec("deploy", (visit,)) for visit in deployed]
        steps.append(StepSpec("measure", tuple(every)))
        steps += [StepSpec("delete", (visit,)) for visit in deployed]
    else:
        for visit in every:
            if visit.arm.deployed:
                steps.append(StepSpec("deploy", (visit,)))
            steps.append(StepSpec("measure", (visit,)))
            if visit.arm.deployed:
                steps.append(StepSpec("delete", (visit,)))
    steps += [StepSpec("combine"), StepSpec("report")]
    return steps


def combine_order(plan: Plan) -> list[str]:
    """Result names in the order `combine` takes them: the baseline first and, when it was
    measured again, its last repeat last (so the A-vs-A′ drift is that of the whole run)."""
    every = visits(plan)
    first = every[0]
    repeats = [v for v in every if v.arm.name == first.arm.name and v.occurrence > 0]
    last = repeats[-1] if repeats else None
    middle = [v for v in every[1:] if v is not last]
    return [v.result_name for v in [first, *middle, *([last] if last else [])]]


def measured_order(plan: Plan, measured: list[str]) -> tuple[str, str | None]:
    """The order to state for a run: the plan's, or, when the journal's time order of the
    measurements (each visit at its last measurement) differs, that order's letters and a note
    saying both. An interleaved run stays interleaved unless some of its arms were measured
    again without the others (a result deleted before a resume): then it is the time order too.
    A journal from before the order was kept states the plan's."""
    every = visits(plan)
    last = {name: index for index, name in enumerate(measured)}
    if any(visit.result_name not in last for visit in every):
        return plan.order_text, None
    actual = sorted(every, key=lambda visit: last[visit.result_name])
    letter = {arm.name: chr(ord("A") + index) for index, arm in enumerate(plan.arms)}
    letters = "".join(letter[visit.arm.name] for visit in actual)
    names = ", ".join(visit.result_name for visit in actual)
    again = [v.result_name for v in actual if measured.count(v.result_name) > 1]
    if plan.interleaved:
        counts = {measured.count(visit.result_name) for visit in every}
        if len(counts) == 1:  # every arm measured as often: together, taking turns
            return plan.order_text, None
        return letters, (
            f"planned interleaved, measured {names} in that time order; {', '.join(again)} "
            "measured again on resume without the others, their requests not in turn"
        )
    if actual == every:
        return plan.order_text, None
    more = f"; {', '.join(again)} measured again on resume" if again else ""
    return letters, f"planned {plan.order_text}, measured {names} in that time order{more}"
