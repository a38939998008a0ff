"""Tear down what sagemeter deployed: endpoint (and wait until it is gone), config, model.

Nothing without sagemeter's ownership tag is ever deleted. An endpoint still Creating cannot be
deleted (SageMaker refuses), so delete waits, with progress, until it is InService or Failed, or
with `no_wait` says what to do instead. Each step is reported the way the article prints it:
"endpoint: deleted / endpoint-config: deleted / model: deleted".
"""

from __future__ import annotations

from typing import Any, Literal

from botocore.exceptions import ClientError
from pydantic import BaseModel, Field

from sagemeter.errors import PlatformError, UserError
from sagemeter.sagemaker.aws import Aws, aws_errors, is_not_found, one_line
from sagemeter.sagemaker.endpoint import (
    BUSY_STATES,
    DEFAULT_POLL_S,
    ProgressCallback,
    describe_endpoint,
    wait_until,
)
from sagemeter.sagemaker.inventory import list_endpoints
from sagemeter.sagemaker.ledger import Ledger, LedgerRecord, ResourceKind
from sagemeter.sagemaker.region import placed_elsewhere
from sagemeter.sagemaker.spec import is_ours

DEFAULT_DELETE_DEADLINE_S = 3600.0  # a Creating endpoint can take ~30 min to fail for capacity

StepOutcome = Literal[
    "deleted",
    "not found",
    "skipped: not tagged as sagemeter's",
    "skipped: made by another deploy",
]


class DeleteStep(BaseModel):
    kind: ResourceKind
    name: str
    outcome: StepOutcome


class DeleteReport(BaseModel):
    name: str
    region: str
    steps: list[DeleteStep] = Field(default_factory=list)
    error: str | None = None

    @property
    def deleted_anything(self) -> bool:
        return any(step.outcome == "deleted" for step in self.steps)


def resource_tags(aws: Aws, region: str, arn: str) -> list[dict[str, str]]:
    tags: list[dict[str, str]] = []
    for page in aws.sagemaker(region).get_paginator("list_tags").paginate(ResourceArn=arn):
        tags.extend({"Key": t["Key"], "Value": t.get("Value", "")} for t in page.get("Tags", []))
    return tags


def _describe(aws: Aws, region: str, kind: ResourceKind, name: str) -> dict[str, Any] | None:
    client = aws.sagemaker(region)
    try:
        if kind == "endpoint-config":
            return dict(client.describe_endpoint_config(EndpointConfigName=name))
        return dict(client.describe_model(ModelName=name))
    except ClientError as exc:
        if is_not_found(exc):
            return None
        raise


def _remember(names: list[str], name: str | None) -> None:
    if name and name not in names:
        names.append(name)


def delete(
    name: str,
    region: str,
    *,
    no_wait: bool = False,
    on_progress: ProgressCallback | None = None,
    deadline_s: float | None = DEFAULT_DELETE_DEADLINE_S,
    poll_s: float = DEFAULT_POLL_S,
    aws: Aws | None = None,
    ledger: Ledger | None = None,
) -> DeleteReport:
    """Delete endpoint `name` in `region`, then its config and model, if sagemeter made them."""
    aws = aws or Aws()
    aws.require_credentials()
    ledger = ledger or Ledger()
    record = ledger.get(region, name)
    report = remove(
        aws,
        ledger,
        name,
        region,
        record,
        no_wait=no_wait,
        on_progress=on_progress,
        deadline_s=deadline_s,
        poll_s=poll_s,
    )
    if (
        record is None
        and not report.deleted_anything
        and all(step.outcome == "not found" for step in report.steps)
    ):
        elsewhere = placed_elsewhere(name, region, ledger)
        if elsewhere:
            raise UserError(f"nothing to delete: no endpoint {name} in {region}; {elsewhere}")
        raise UserError(
            f"nothing to delete: no endpoint {name} in {region} and no sagemeter record of it "
            "(see `sagemeter sagemaker list`)"
        )
    return report


def remove(
    aws: Aws,
    ledger: Ledger,
    name: str,
    region: str,
    record: LedgerRecord | None,
    *,
    no_wait: bool = False,
    on_progress: ProgressCallback | None = None,
    deadline_s: float | None = DEFAULT_DELETE_DEADLINE_S,
    poll_s: float = DEFAULT_POLL_S,
    only_this_deploy: bool = False,
) -> DeleteReport:
    """The deletion itself, also used by deploy to clean up a failed attempt.

    `only_this_deploy` (deploy's cleanup): delete the endpoint only when it is the one `record`
    made (its recorded ARN, or one of the record's endpoint configs), never another deploy's
    endpoint of the same name. Raises UserError, keeping the record, when the endpoint is not
    gone by `deadline_s` or its delete fails (status Failed, as botocore's EndpointDeleted waiter
    reads it).
    """
    report = DeleteReport(name=name, region=region)
    configs: list[str] = []
    models: list[str] = []

    def mark(kind: ResourceKind, resource: str) -> None:
        if record is not None and any(
            r.kind == kind and r.name == resource and r.may_exist for r in record.resources
        ):
            record.mark(kind, resource, "deleted")
            ledger.save(record)

    with aws_errors(f"delete endpoint {name}", region):
        description = describe_endpoint(aws, name, region)
        foreign = description is not None and only_this_deploy and not _made_by(description, record)
        if foreign:
            # Another deploy's endpoint of the same name: leave it, remove only our own parts.
            description = None
            report.steps.append(
                DeleteStep(kind="endpoint", name=name, outcome="skipped: made by another deploy")
            )
        if description is not None:
            if not is_ours(resource_tags(aws, region, description["EndpointArn"])):
                raise UserError(
                    f"endpoint {name} in {region} is not tagged as sagemeter's: not touching it "
                    "(delete it in the SageMaker console if it is yours)"
                )
            status = description.get("EndpointStatus")
            if status in BUSY_STATES:
                if no_wait:
                    raise UserError(
                        f"endpoint {name} in {region} is {status}, and SageMaker cannot delete it "
                        "until it is InService or Failed: run "
                        f"`sagemeter sagemaker delete {name}@{region}` again later, or without "
                        "--no-wait to wait here"
                    )
                description, reached = wait_until(
                    aws,
                    name,
                    region,
                    done=lambda d: d is None or d.get("EndpointStatus") not in BUSY_STATES,
                    phase=f"waiting for {status} to end before deleting",
                    deadline_s=deadline_s,
                    poll_s=poll_s,
                    on_progress=on_progress,
                )
                if not reached:
                    raise PlatformError(
                        f"endpoint {name} in {region} is still {status} after "
                        f"{(deadline_s or 0) / 60:.0f} min; it stays recorded: run "
                        f"`sagemeter sagemaker delete {name}@{region}` again later"
                    )
        if description is not None:
            _remember(configs, description.get("EndpointConfigName"))
            _delete_endpoint(aws, name, region, description, deadline_s, poll_s, on_progress)
            report.steps.append(DeleteStep(kind="endpoint", name=name, outcome="deleted"))
            mark("endpoint", name)
        elif not foreign:
            report.steps.append(DeleteStep(kind="endpoint", name=name, outcome="not found"))
            mark("endpoint", name)

        for resource in record.leftovers() if record else []:
            if resource.kind == "endpoint-config":
                _remember(configs, resource.name)
            elif resource.kind == "model":
                _remember(models, resource.name)

        for config_name in configs:
            config = _describe(aws, region, "endpoint-config", config_name)
            if config is None:
                report.steps.append(
                    DeleteStep(kind="endpoint-config", name=config_name, outcome="not found")
                )
                mark("endpoint-config", config_name)
                continue
            if not is_ours(resource_tags(aws, region, config["EndpointConfigArn"])):
                report.steps.append(
                    DeleteStep(
                        kind="endpoint-config",
                        name=config_name,
                        outcome="skipped: not tagged as sagemeter's",
                    )
                )
                continue
            for variant in config.get("ProductionVariants", []) or []:
                _remember(models, variant.get("ModelName"))
                for pool in variant.get("InstancePools", []) or []:
                    _remember(models, pool.get("ModelNameOverride"))
            try:
                aws.sagemaker(region).delete_endpoint_config(EndpointConfigName=config_name)
                outcome: StepOutcome = "deleted"
            except ClientError as exc:
                if not is_not_found(exc):
                    raise
                outcome = "not found"
            report.steps.append(
                DeleteStep(kind="endpoint-config", name=config_name, outcome=outcome)
            )
            mark("endpoint-config", config_name)

        for model_name in models:
            model = _describe(aws, region, "model", model_name)
            if model is None:
                report.steps.append(DeleteStep(kind="model", name=model_name, outcome="not found"))
                mark("model", model_name)
                continue
            if not is_ours(resource_tags(aws, region, model["ModelArn"])):
                report.steps.append(
                    DeleteStep(
                        kind="model", name=model_name, outcome="skipped: not tagged as sagemeter's"
                    )
                )
                continue
            try:
                aws.sagemaker(region).delete_model(ModelName=model_name)
                outcome = "deleted"
            except ClientError as exc:
                if not is_not_found(exc):
                    raise
                outcome = "not found"
            report.steps.append(DeleteStep(kind="model", name=model_name, outcome=outcome))
            mark("model", model_name)

    if record is not None:
        record.endpoint_status = "Deleted"
        if record.active:
            ledger.save(record)
        else:
            ledger.archive(record)
    return report


def _made_by(description: dict[str, Any], record: LedgerRecord | None) -> bool:
    """Whether the endpoint `description` is the one `record`'s deploy created."""
    if record is None:
        return False
    recorded = record.resource("endpoint")
    if recorded is not None and recorded.arn and recorded.arn == description.get("EndpointArn"):
        return True
    configs = {r.name for r in record.resources if r.kind == "endpoint-config"}
    return description.get("EndpointConfigName") in configs


def _delete_endpoint(
    aws: Aws,
    name: str,
    region: str,
    description: dict[str, Any],
    deadline_s: float | None,
    poll_s: float,
    on_progress: ProgressCallback | None,
) -> None:
    """DeleteEndpoint, then wait until DescribeEndpoint says it is gone (or raise PlatformError)."""
    failed_before = description.get("EndpointStatus") == "Failed"
    if description.get("EndpointStatus") != "Deleting":
        try:
            aws.sagemaker(region).delete_endpoint(EndpointName=name)
        except ClientError as exc:
            if not is_not_found(exc):
                raise
    seen: set[str] = set()

    def done(d: dict[str, Any] | None) -> bool:
        if d is None:
            return True
        status = str(d.get("EndpointStatus"))
        seen.add(status)
        # Failed ends the wait (the EndpointDeleted waiter's failure state), unless the endpoint
        # was Failed before the delete and has not yet been seen Deleting.
        return status == "Failed" and (not failed_before or "Deleting" in seen)

    final, reached = wait_until(
        aws,
        name,
        region,
        done=done,
        phase="deleting endpoint",
        deadline_s=deadline_s,
        poll_s=poll_s,
        on_progress=on_progress,
        with_logs=False,
    )
    if final is None:
        return
    status = final.get("EndpointStatus")
    keep = f"it stays recorded: run `sagemeter sagemaker delete {name}@{region}` again"
    if not reached:
        raise PlatformError(
            f"endpoint {name} in {region} is still {status} "
            f"{(deadline_s or 0) / 60:.0f} min after the delete request; {keep} later"
        )
    reason = one_line(str(final.get("FailureReason") or "no reason given"), 200)
    raise PlatformError(f"deleting endpoint {name} in {region} failed ({reason}); {keep}")


def delete_all_mine(
    regions: list[str] | None = None,
    *,
    no_wait: bool = False,
    on_progress: ProgressCallback | None = None,
    deadline_s: float | None = DEFAULT_DELETE_DEADLINE_S,
    poll_s: float = DEFAULT_POLL_S,
    aws: Aws | None = None,
    ledger: Ledger | None = None,
) -> list[DeleteReport]:
    """Delete every endpoint sagemeter recorded or tagged in `regions`; one report each.

    A failure on one endpoint is recorded in its report and the others still go.
    """
    aws = aws or Aws()
    ledger = ledger or Ledger()
    targets: list[tuple[str, str]] = []
    inventory = list_endpoints(regions, aws=aws, ledger=ledger, with_prices=False)
    for info in inventory.endpoints:
        if (info.ours or info.recorded) and (info.region, info.name) not in targets:
            targets.append((info.region, info.name))
    reports = [
        DeleteReport(name="*", region=region, error=f"could not list endpoints: {why}")
        for region, why in inventory.region_errors.items()
    ]
    for region, name in targets:
        try:
            reports.append(
                remove(
                    aws,
                    ledger,
                    name,
                    region,
                    ledger.get(region, name),
                    no_wait=no_wait,
                    on_progress=on_progress,
                    deadline_s=deadline_s,
                    poll_s=poll_s,
                )
            )
        except UserError as exc:
            reports.append(DeleteReport(name=name, region=region, error=str(exc)))
    return reports
