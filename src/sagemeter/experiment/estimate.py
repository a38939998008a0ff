"""What a run will take and cost, before it starts: every step's time, the endpoints it creates,
their price, and (for `--dry-run`) the account's quota for them.

Times follow the plan's `[estimate]` assumptions (tokens per second per stream, minutes to
deploy and to delete), shown beside the figures. A deployed arm's price is the plan's
`price_per_hour`, else its platform's (SageMaker's: the highest Price List price among the
instance types and regions it may be placed in): the spend cap is checked against the most it
may cost. An arm the run does not deploy costs `price_per_hour` (when given) for the time it is
measured.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from sagemeter.engine_registry import engine_in
from sagemeter.experiment.plan import Arm, Plan, arm_facts, deployed_by_platform
from sagemeter.experiment.steps import StepSpec, Visit, plan_steps
from sagemeter.experiment.stop_estimate import most_batches, most_pairs, stop_notes
from sagemeter.measure.workflow import selected_questions, total_requests
from sagemeter.platforms.registry import Price, platform_of, quota_lines
from sagemeter.settings import MeasureSettings

REQUEST_ALLOWANCE_S = 0.1  # time to first token and the call's own cost, per request sent alone


class ArmPrice(BaseModel):
    usd_per_hour: float | None
    note: str


class StepEstimate(BaseModel):
    index: int
    label: str
    creates: str
    minutes: float
    usd: float | None = None


class Estimate(BaseModel):
    steps: list[StepEstimate]
    minutes: float
    usd: float = Field(
        description="the cost at the prices below: deployed arms from deploy to delete, the "
        "others (with price_per_hour) while measured"
    )
    unpriced: list[str] = Field(default_factory=list, description="arms whose price is unknown")
    prices: dict[str, ArmPrice] = Field(default_factory=dict)
    assumptions: str = Field(
        description="the [estimate] rates, and what each [stop] setting was counted at (the "
        "most a run may ask, and the expected questions of a sequential quality stop)"
    )
    stop_bounds: list[str] = Field(
        default_factory=list, description="the [stop] part of the assumptions, one per setting"
    )


def measure_seconds(settings: MeasureSettings, tokens_per_second: float) -> float:
    """One measurement at `tokens_per_second` per stream (parallel streams at the same rate),
    at the most it may ask: a precision target (`[stop] speed`) counts its maximum of repeats."""
    questions = len(selected_questions(settings).questions)
    rate = tokens_per_second
    pairs, per_level = most_pairs(settings), most_batches(settings)
    decode_tokens = settings.decode_warmup * settings.short_tokens
    decode_tokens += pairs * (settings.short_tokens + settings.long_tokens)
    # Long prompts run their fixed batches: the precision target is the parallel phase's.
    batches = len(settings.load_levels) * per_level
    batches += len(settings.long_prompt_levels) * settings.load_batches
    seconds = decode_tokens / rate
    seconds += batches * (settings.load_max_tokens / rate + settings.batch_pause_s)
    seconds += questions * settings.quality_max_tokens / rate
    seconds += settings.fidelity_prompts * settings.fidelity_max_tokens / rate
    levels = [*settings.load_levels, *settings.long_prompt_levels]
    sequential = total_requests(settings, questions) - sum(levels) * settings.load_batches
    sequential += 2 * (pairs - settings.decode_repeats)
    return seconds + (sequential + batches + settings.fidelity_prompts) * REQUEST_ALLOWANCE_S


def metrics_wait_seconds(arm: Arm, settings: MeasureSettings) -> float:
    """An arm whose platform keeps its own metrics (SageMaker's CloudWatch) is waited for, at
    most this long, after its measure (the estimate counts the whole wait: the endpoint bills
    through it)."""
    facts = arm_facts(arm)
    return settings.metrics_wait_s if facts is not None and facts.waits_for_metrics else 0.0


def start_seconds(arm: Arm) -> float:
    """The time to start the server an engine arm (local:, vllm:, cmd:, a plug-in's) is
    measured on, once per visit: its engine's own estimate."""
    engine = engine_in(arm.target or "")
    return engine.start_seconds if engine is not None else 0.0


def arm_price(plan: Plan, arm: Arm, checked: dict[str, object]) -> Price:
    """The hourly price a deployed arm is estimated at: the plan's, else its platform's (the
    most it may be placed at)."""
    assert arm.platform is not None
    return platform_of(arm.platform).price(checked[arm.platform], arm, plan.price_per_hour)


def quotas(plan: Plan, checked: dict[str, object]) -> list[str]:
    """The dry run's quota lines: each deployed arm's platform (through the registry) says what
    its arms need at once against what the account allows; a platform that knows no quota, or
    whose check found nothing, says nothing."""
    lines: list[str] = []
    for name in deployed_by_platform(plan):
        if name in checked:
            lines += quota_lines(platform_of(name), checked[name], plan)
    return lines


def _creates(plan: Plan, step: StepSpec, checked: dict[str, object]) -> str:
    if step.kind == "deploy":
        arm = step.visits[0].arm
        assert arm.platform is not None
        return platform_of(arm.platform).creates(checked[arm.platform], arm)
    if step.kind == "measure":
        return ", ".join(f"measure-{visit.result_name}.json" for visit in step.visits)
    if step.kind == "delete":
        return "deletes them (waits out Creating first)"
    if step.kind == "combine":
        return "compare.json"
    return "report.md, report.html, plots/"


def estimate(
    plan: Plan,
    checked: dict[str, object],
    *,
    remaining: set[str] | None = None,
) -> Estimate:
    """Every step's minutes and, for deployed arms, dollars; `remaining` (result names not yet
    measured, when resuming) leaves out the visits already measured."""
    settings = plan.settings()
    assume = plan.estimate
    measure_s = measure_seconds(settings, assume.tokens_per_second)
    quotes = {arm.name: arm_price(plan, arm, checked) for arm in plan.arms if arm.deployed}
    prices = {
        name: ArmPrice(usd_per_hour=quote.usd_per_hour, note=quote.note)
        for name, quote in quotes.items()
    }

    def wanted(visit: Visit) -> bool:
        return remaining is None or visit.result_name in remaining

    cap_s = None if settings.max_minutes is None else settings.max_minutes * 60

    def capped(seconds: float) -> float:
        """`[stop] max_minutes` ends an arm's measuring (its engine's start included) there."""
        return seconds if cap_s is None else min(seconds, cap_s)

    def visit_s(visit: Visit) -> float:
        working = capped(measure_s + start_seconds(visit.arm))
        return working + metrics_wait_seconds(visit.arm, settings)

    def step_s(visits: tuple[Visit, ...]) -> float:
        """A measure step: its visits one after another, or interleaved, all at once in turn
        (each arm's time limit runs through the whole step)."""
        mine = [v for v in visits if wanted(v)]
        if not plan.interleaved:
            return sum(visit_s(v) for v in mine)
        working = capped(sum(measure_s + start_seconds(v.arm) for v in mine))
        return working + sum(metrics_wait_seconds(v.arm, settings) for v in mine)

    def hourly(arm: Arm) -> float | None:
        quote = quotes.get(arm.name)
        if quote is None or quote.usd_per_hour is None:
            return None
        return quote.usd_per_hour * quote.count

    rows: list[StepEstimate] = []
    usd = 0.0
    unpriced: set[str] = set()
    steps = plan_steps(plan)
    deployed = [
        step.visits[0] for step in steps if step.kind == "deploy" and wanted(step.visits[0])
    ]
    end_s = 0.0
    if plan.interleaved:
        measuring = next(step for step in steps if step.kind == "measure")
        end_s = len(deployed) * assume.deploy_minutes * 60
        end_s += step_s(measuring.visits)
    for index, step in enumerate(steps, start=1):
        if step.visits and not any(wanted(v) for v in step.visits):
            continue
        seconds = {
            "deploy": assume.deploy_minutes * 60,
            "delete": assume.delete_minutes * 60,
            "measure": step_s(step.visits),
        }.get(step.kind, 5.0)
        cost = None
        if step.kind == "deploy":
            arm = step.visits[0].arm
            rate = hourly(arm)
            if plan.interleaved:  # live from its deploy until its own delete at the end
                position = deployed.index(step.visits[0])
                lives = end_s - position * assume.deploy_minutes * 60
                lives += (position + 1) * assume.delete_minutes * 60
            else:
                lives = assume.deploy_minutes * 60 + visit_s(step.visits[0])
                lives += assume.delete_minutes * 60
            if rate is None:
                unpriced.add(arm.name)
            else:
                cost = rate * lives / 3600
                usd += cost
        elif step.kind == "measure" and plan.price_per_hour is not None:
            # An arm the run does not deploy is priced for the time it is measured (journal.py).
            undeployed = sum(1 for v in step.visits if wanted(v) and not v.arm.deployed)
            if undeployed:
                cost = plan.price_per_hour * seconds * undeployed / 3600
                usd += cost
        rows.append(
            StepEstimate(
                index=index,
                label=step.label,
                creates=_creates(plan, step, checked),
                minutes=round(seconds / 60, 1),
                usd=None if cost is None else round(cost, 2),
            )
        )
    assumptions = (
        f"{assume.tokens_per_second:g} tokens/s per stream, {assume.deploy_minutes:g} min per "
        f"deploy, {assume.delete_minutes:g} min per delete (the plan's [estimate])"
    )
    bounds = stop_notes(plan, len(selected_questions(settings).questions))
    if bounds:
        assumptions += "; " + "; ".join(bounds)
    return Estimate(
        steps=rows,
        minutes=round(sum(row.minutes for row in rows), 1),
        usd=round(usd, 2),
        unpriced=sorted(unpriced),
        prices=prices,
        assumptions=assumptions,
        stop_bounds=bounds,
    )
