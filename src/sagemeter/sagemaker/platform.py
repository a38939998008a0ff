"""SageMaker as a platform of the experiment runner (`[arm.sagemaker]`), registered like a
plug-in under `sagemeter.platforms` (platforms/registry.py).

Every call is the one `sagemeter sagemaker deploy`/`delete` make: a deploy falls back across
the arm's regions and instance types, and the region and instance type SageMaker placed, and
their price, go into the journal's deployment (`record`: the endpoint, its regions, the one it
was placed in, the instance types). On resume an endpoint from before is waited out while
Creating, then used when InService. A delete deletes in every region the deploy left something,
waiting out Creating first. AWS failures leave here as one line (`explain`): a PlatformError.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, Field

from sagemeter import sagemaker as sm
from sagemeter.errors import ManyProblems, PlatformError, SagemeterError, UserError, exit_code
from sagemeter.platforms.deployment import Deployment, parse_utc
from sagemeter.platforms.registry import CheckProblems, Facts, Hooks, Platform, Price
from sagemeter.sagemaker.aws import explain
from sagemeter.sagemaker.deploy_fields import DEFAULT_DEADLINE_MINUTES
from sagemeter.sagemaker.endpoint import (
    BUSY_STATES,
    describe_endpoint,
    placed_instance_types,
    wait_until,
)
from sagemeter.sagemaker.plan_arms import (
    check_names_free,
    deploy_spec,
    endpoint_name,
    table_of,
)
from sagemeter.sagemaker.plan_table import SageMakerArm
from sagemeter.sagemaker.pricing import try_hourly_price
from sagemeter.sagemaker.redact import redact
from sagemeter.sagemaker.region import known_endpoint_region
from sagemeter.targets import ACCEPTED_FORMS, SAGEMAKER_ENDPOINT_NAME, SageMakerTarget, Target

if TYPE_CHECKING:
    from sagemeter.experiment.plan import Arm, Plan

_T = TypeVar("_T")


class SageMakerRecord(BaseModel):
    """A deployment's SageMaker fields, as the journal's `record` keeps them."""

    endpoint: str
    regions: list[str] = Field(description="the regions deploy may try, in order")
    region: str | None = Field(None, description="where SageMaker placed it")
    instance_types: list[str] = Field(description="asked for, in priority order")
    placed_instance_type: str | None = None


@dataclass
class Checked:
    """What `check` found: each deployed arm's spec, and the account (None without credentials,
    as a dry run may be)."""

    plan: Plan
    specs: dict[str, sm.DeploySpec]
    aws: sm.Aws | None
    ledger: sm.Ledger = field(default_factory=sm.Ledger)

    def account(self) -> sm.Aws:
        """The account, with credentials required now (a run that deploys needs them)."""
        if self.aws is None:
            self.aws = sm.Aws()
            self.aws.require_credentials()
        return self.aws


class QuotaLine(BaseModel):
    instance_type: str
    needs: int
    rows: list[sm.QuotaRow] = Field(default_factory=list)
    error: str | None = None

    def text(self) -> str:
        """The dry run's line: each region's free instances against the quota, and whether
        they are enough."""
        if self.error:
            return f"quota {self.instance_type}: not checked ({redact(self.error)})"
        parts = []
        for row in self.rows:
            free = "?" if row.free is None else f"{row.free:g}"
            quota = "?" if row.quota is None else f"{row.quota:g}"
            enough = "" if row.free is None else (" ok" if row.free >= self.needs else " too few")
            parts.append(f"{row.region} {free} free of {quota}{enough}")
        return f"quota {self.instance_type} (needs {self.needs} at once): {'; '.join(parts)}"


@contextmanager
def _aws_errors(action: str) -> Iterator[None]:
    """An AWS failure becomes the one line `sagemeter sagemaker` says for it."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except (ClientError, BotoCoreError) as exc:
        raise explain(exc, action) from None


class SageMakerPlatform:
    """The registry's entry for `[arm.sagemaker]`."""

    name = "sagemaker"

    def table(self, data: Mapping[str, Any]) -> BaseModel:
        return SageMakerArm.model_validate(data)

    def plan_problems(self, plan: Plan, arms: Sequence[Arm]) -> list[str]:
        problems = []
        endpoints: dict[str, str] = {}
        for arm in arms:
            endpoint = endpoint_name(plan, arm)
            key = f'arm "{arm.name}".sagemaker.endpoint'
            if not SAGEMAKER_ENDPOINT_NAME.match(endpoint):
                problems.append(
                    f"{key}: {endpoint!r} is not a valid endpoint name (1-63 letters, digits, "
                    "hyphens)"
                )
            elif endpoint in endpoints:
                problems.append(
                    f'{key}: {endpoint!r} is also arm "{endpoints[endpoint]}"\'s endpoint; '
                    "set `endpoint` to tell them apart"
                )
            endpoints[endpoint] = arm.name
        return problems

    def check(
        self, plan: Plan, arms: Sequence[Arm], *, fresh: bool, need_credentials: bool
    ) -> Checked:
        problems: list[str] = []
        failures: list[SagemeterError] = []

        def collect(check: Callable[[], _T]) -> _T | None:
            try:
                return check()
            except ManyProblems as exc:
                problems.extend(exc.problems)
            except UserError as exc:
                problems.append(str(exc))
                if exit_code(exc) != ManyProblems.exit_code:
                    failures.append(exc)
            return None

        aws = sm.Aws()
        has_credentials = aws.session.get_credentials() is not None
        if need_credentials or has_credentials:
            collect(aws.require_credentials)
        specs: dict[str, sm.DeploySpec] = {}
        for arm in arms:
            spec = collect(partial(deploy_spec, plan, arm, aws))
            if spec is not None:
                specs[arm.name] = spec
        checked = Checked(plan, specs, aws if has_credentials else None)
        if fresh and has_credentials and not problems:
            with _aws_errors("check the endpoint names"):
                collect(partial(check_names_free, specs, aws, checked.ledger))
        if problems:
            raise CheckProblems(problems, failures[0] if failures else None)
        return checked

    def price(self, checked: object, arm: Arm, price_per_hour: float | None) -> Price:
        assert isinstance(checked, Checked)
        spec = checked.specs[arm.name]
        if price_per_hour is not None:
            return Price(price_per_hour, "price_per_hour", spec.count)
        if checked.aws is None:
            return Price(None, "no AWS credentials to look the price up", spec.count)
        found: list[tuple[float, str, str]] = []
        missing: list[str] = []
        for instance_type in spec.instance_types:
            for region in spec.regions:
                quote, why = try_hourly_price(instance_type, region, aws=checked.aws)
                if quote is None:
                    missing.append(f"{instance_type} in {region}: {why}")
                else:
                    found.append((quote.usd_per_hour, instance_type, region))
        if not found:
            return Price(None, "; ".join(missing[:2]), spec.count)
        usd, instance_type, region = max(found)
        note = f"{instance_type} in {region}, the highest it may be placed at (Price List)"
        if missing:
            note += f"; unknown: {'; '.join(missing[:2])}"
        return Price(usd, note, spec.count)

    def creates(self, checked: object, arm: Arm) -> str:
        assert isinstance(checked, Checked)
        spec = checked.specs[arm.name]
        regions = spec.regions[0] + (
            f", else {', '.join(spec.regions[1:])}" if len(spec.regions) > 1 else ""
        )
        return (
            f"model, endpoint config and endpoint {spec.name} "
            f"({' / '.join(spec.instance_types)} x{spec.count}) in {regions}"
        )

    def facts(self, arm: Arm) -> Facts:
        return replace(self.endpoint_facts(None), predicted_decode=table_of(arm).predicted_decode)

    def endpoint_facts(self, target: Target | None) -> Facts:
        """A SageMaker endpoint, deployed by the run or running already: the measure waits for
        its CloudWatch metrics, and it answers through the runtime API, not OpenAI's."""
        return Facts(
            waits_for_metrics=True,
            speaks_openai=False,
            kind="a SageMaker endpoint",
            live="InService",
        )

    def deployment(self, checked: object, arm: Arm, result: str) -> Deployment:
        assert isinstance(checked, Checked)
        spec = checked.specs[arm.name]
        record = SageMakerRecord(
            endpoint=spec.name, regions=spec.regions, instance_types=spec.instance_types
        )
        return Deployment(
            result=result,
            arm=arm.name,
            platform=self.name,
            target=f"{spec.name}@{spec.regions[0]}",
            instance_type=spec.instance_types[0],
            count=spec.count,
            record=record.model_dump(),
        )

    def deploy(self, checked: object, deployment: Deployment, hooks: Hooks) -> None:
        assert isinstance(checked, Checked)
        spec = checked.specs[deployment.arm]
        record = SageMakerRecord.model_validate(deployment.record)
        with _aws_errors(f"deploy {spec.name}"):
            result = sm.deploy(
                spec,
                on_progress=hooks.progress,
                deadline_s=_deadline_s(checked, deployment),
                poll_s=hooks.poll_s,
                price_per_hour=hooks.price_per_hour,
                aws=checked.account(),
                ledger=checked.ledger,
            )
        record.region = result.region
        deployment.target = f"{spec.name}@{result.region}"
        deployment.attempts = [
            f"{attempt.region}: {attempt.outcome}"
            + (f" ({attempt.reason})" if attempt.reason else "")
            for attempt in result.attempts[:-1]
        ]
        deployment.record = record.model_dump()
        if not result.in_service:
            deployment.state = "failed"
            deployment.note = result.failure_reason or result.note or result.status
            hooks.save()
            reason = result.note if result.timed_out else result.failure_reason
            raise PlatformError(
                f"{spec.name} in {result.region}: {result.status or 'failed'}: {reason or '?'}"
            )
        placed = result.placed_instance_types or [spec.instance_type]
        record.placed_instance_type = deployment.instance_type = placed[0]
        deployment.record = record.model_dump()
        if result.hourly_usd is not None:
            deployment.hourly_usd = result.hourly_usd
            deployment.price_note = f"{result.priced_instance_type} in {result.region}: " + (
                result.price_note or "?"
            )
        else:
            deployment.price_note = (
                f"no price for {placed[0]} in {result.region} ({result.price_note}); counted at "
                "the estimate"
            )

    def adopt(self, checked: object, deployment: Deployment, hooks: Hooks) -> bool:
        assert isinstance(checked, Checked)
        record = SageMakerRecord.model_validate(deployment.record)
        with _aws_errors(f"describe {record.endpoint}"):
            return self._adopt(checked, deployment, record, hooks)

    def _adopt(
        self, checked: Checked, deployment: Deployment, record: SageMakerRecord, hooks: Hooks
    ) -> bool:
        aws = checked.account()
        for region, kept in _recorded(checked, deployment, record):
            description = describe_endpoint(aws, record.endpoint, region)
            if description is None:
                continue
            status = description.get("EndpointStatus")
            if status in BUSY_STATES:
                hooks.note(
                    f"{record.endpoint}@{region} is still {status} from before: waiting for "
                    "it to finish"
                )
                description, _ = wait_until(
                    aws,
                    record.endpoint,
                    region,
                    done=lambda d: d is None or d.get("EndpointStatus") not in BUSY_STATES,
                    phase="waiting for the deploy from before",
                    deadline_s=_deadline_s(checked, deployment),
                    poll_s=hooks.poll_s,
                    on_progress=hooks.progress,
                )
            if description is None or description.get("EndpointStatus") != "InService":
                continue
            placed = placed_instance_types(description) or kept.placed_instance_types
            placed_type = placed[0] if placed else kept.instance_types[0]
            record.region, record.placed_instance_type = region, placed_type
            deployment.record = record.model_dump()
            deployment.target = f"{record.endpoint}@{region}"
            deployment.instance_type = placed_type
            if kept.hourly_usd is not None and kept.priced_instance_type == placed_type:
                deployment.hourly_usd = kept.hourly_usd
                deployment.price_note = f"{placed_type} in {region}: {kept.price_note}"
            elif hooks.price_per_hour is None:
                quote, why = try_hourly_price(placed_type, region, aws=aws)
                if quote is not None:
                    deployment.hourly_usd = quote.usd_per_hour
                deployment.price_note = (
                    f"{placed_type} in {region}: {quote.source if quote else why}"
                )
            return True
        return False

    def delete(self, checked: object, deployment: Deployment, hooks: Hooks) -> None:
        assert isinstance(checked, Checked)
        record = SageMakerRecord.model_validate(deployment.record)
        with _aws_errors(f"delete {record.endpoint}"):
            aws = checked.account()
            for region, kept in _recorded(checked, deployment, record):
                busy = kept.endpoint_status in BUSY_STATES
                wait = f" (still {kept.endpoint_status}: waiting until SageMaker allows it)"
                hooks.note(f"deleting {record.endpoint}@{region}{wait if busy else ''}")
                report = sm.delete(
                    record.endpoint,
                    region,
                    on_progress=hooks.progress,
                    poll_s=hooks.poll_s,
                    aws=aws,
                    ledger=checked.ledger,
                )
                hooks.deleted(report)

    def target(self, deployment: Deployment) -> Target:
        record = SageMakerRecord.model_validate(deployment.record)
        if record.region is None:
            raise UserError(f"{deployment.result}: its endpoint was never placed")
        return SageMakerTarget(record.endpoint, record.region, "recorded")

    def bare_target(self, name: str, text: str) -> Target:
        """A bare NAME is a SageMaker endpoint: in the region this machine's record says it was
        placed in (a capacity fallback need not be repeated), else the configured one; the one
        rule of `sagemeter.sagemaker.region`."""
        choice = known_endpoint_region(name, sm.Aws())
        if choice is None:
            raise UserError(
                f"target {text!r}: no SageMaker endpoint of that name was deployed from here and "
                f"no AWS region is configured; write {name}@REGION or set AWS_REGION; "
                f"accepted forms: {ACCEPTED_FORMS}"
            )
        return SageMakerTarget(name, choice.region, choice.source)

    def quota(self, checked: object, plan: Plan) -> list[str]:
        """Per instance type the arms may be placed on: how many they need at once, and the
        quota and free instances in each region they may use (Service Quotas)."""
        assert isinstance(checked, Checked)
        if not checked.specs:
            return []
        if checked.aws is None:
            return ["quota: not checked (no AWS credentials)"]
        return [line.text() for line in quota_lines(plan, checked)]

    def left_running(self, deployment: Deployment) -> str:
        return f"`sagemeter sagemaker delete {deployment.target}`"


def _deadline_s(checked: Checked, deployment: Deployment) -> float:
    """How long a deploy (or the wait for one from before) may take: the arm's deadline."""
    arm = checked.plan.arm_named(deployment.arm)
    table = arm.table
    return (
        table.deadline_minutes if isinstance(table, SageMakerArm) else DEFAULT_DEADLINE_MINUTES
    ) * 60


def _recorded(
    checked: Checked, deployment: Deployment, record: SageMakerRecord
) -> list[tuple[str, sm.LedgerRecord]]:
    """This deployment's records in the local ledger that may still exist in AWS."""
    since = parse_utc(deployment.started_utc).replace(microsecond=0)
    found = []
    for region in dict.fromkeys([record.region, *record.regions]):
        if region is None:
            continue
        kept = checked.ledger.get(region, record.endpoint)
        if kept is not None and kept.active and parse_utc(kept.created_utc) >= since:
            found.append((region, kept))
    return found


def quota_lines(plan: Plan, checked: Checked) -> list[QuotaLine]:
    """Per instance type: the quota and free instances in each region an arm may use, and how
    many the run needs at once (one arm at a time in A-B-A order, all of them interleaved)."""
    assert checked.aws is not None
    needs: dict[str, int] = {}
    regions: dict[str, list[str]] = {}
    for arm in plan.arms:
        spec = checked.specs.get(arm.name)
        if spec is None:
            continue
        for instance_type in spec.instance_types:
            at_once = needs.get(instance_type, 0)
            needs[instance_type] = (
                at_once + spec.count if plan.interleaved else max(at_once, spec.count)
            )
            known = regions.setdefault(instance_type, [])
            known.extend(region for region in spec.regions if region not in known)
    lines = []
    for instance_type, count in needs.items():
        line = QuotaLine(instance_type=instance_type, needs=count)
        try:
            line.rows = sm.quota(instance_type, regions[instance_type], aws=checked.aws)
        except UserError as exc:  # a read for information only: say why, never stop the plan
            line.error = str(exc)
        lines.append(line)
    return lines


SAGEMAKER: Platform = SageMakerPlatform()
