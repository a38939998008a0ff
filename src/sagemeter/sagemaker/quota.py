"""How many instances of a type this account may run as endpoints per region, and how many it does.

The quota is named "<instance type> for endpoint usage" in Service Quotas (service code
`sagemaker`). The applied value comes from ListServiceQuotas; a quota never changed by the account
is only in ListAWSDefaultServiceQuotas. Usage counts every endpoint in the region, not only
sagemeter's: an endpoint config with InstancePools holds quota for every type it lists.
"""

from __future__ import annotations

from typing import Any, Literal

from botocore.exceptions import ClientError
from pydantic import BaseModel

from sagemeter.errors import UserError
from sagemeter.sagemaker.aws import Aws, aws_errors, error_code, is_not_found

DEFAULT_QUOTA_REGIONS = ("us-east-1", "us-east-2", "us-west-2")
# States in which an endpoint holds (or is about to hold) its instances.
_HOLDING_STATES = {"Creating", "InService", "Updating", "SystemUpdating", "RollingBack"}


class QuotaRow(BaseModel):
    region: str
    instance_type: str
    quota: float | None = None
    quota_source: Literal["applied", "default"] | None = None
    quota_code: str | None = None
    in_use: int | None = None
    free: float | None = None
    error: str | None = None
    in_use_note: str | None = None  # set when some endpoints could not be read: a lower bound


def quota_name(instance_type: str) -> str:
    return f"{instance_type} for endpoint usage"


def _find_quota(aws: Aws, region: str, name: str) -> tuple[dict[str, Any] | None, str | None]:
    client = aws.quotas(region)
    for operation, source in (
        ("list_service_quotas", "applied"),
        ("list_aws_default_service_quotas", "default"),
    ):
        for page in client.get_paginator(operation).paginate(ServiceCode="sagemaker"):  # type: ignore[call-overload]
            for quota in page.get("Quotas", []):
                if quota.get("QuotaName") == name:
                    return dict(quota), source
    return None, None


def _held(aws: Aws, region: str, instance_type: str) -> tuple[int, list[str]]:
    """Instances of `instance_type` held by this account's endpoints in `region`, and the
    endpoints that could not be read (each with its error code): the count leaves them out."""
    holdings, unread = _holdings(aws, region)
    return sum(_held_by(endpoint, config, instance_type) for endpoint, config in holdings), unread


def _holdings(
    aws: Aws, region: str
) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], list[str]]:
    """Every endpoint that holds instances in `region`, with its config; and the endpoints that
    could not be read (each with its error code)."""
    client = aws.sagemaker(region)
    held: list[tuple[dict[str, Any], dict[str, Any]]] = []
    unread: list[str] = []
    for page in client.get_paginator("list_endpoints").paginate():
        for summary in page.get("Endpoints", []):
            if summary.get("EndpointStatus") not in _HOLDING_STATES:
                continue
            try:
                endpoint = client.describe_endpoint(EndpointName=summary["EndpointName"])
                config = client.describe_endpoint_config(
                    EndpointConfigName=endpoint["EndpointConfigName"]
                )
            except ClientError as exc:
                if not is_not_found(exc):  # not-found: deleted between the list and the describe
                    unread.append(f"{summary['EndpointName']} ({error_code(exc) or 'error'})")
                continue
            held.append((dict(endpoint), dict(config)))
    return held, unread


def _held_by(endpoint: dict[str, Any], config: dict[str, Any], instance_type: str) -> int:
    running = {v.get("VariantName"): v for v in endpoint.get("ProductionVariants", []) or []}
    total = 0
    for variant in config.get("ProductionVariants", []) or []:
        summary = running.get(variant.get("VariantName"), {})
        wanted = int(variant.get("InitialInstanceCount") or 0)
        if variant.get("InstanceType") == instance_type:
            total += int(summary.get("CurrentInstanceCount") or wanted)
        elif any(
            p.get("InstanceType") == instance_type for p in variant.get("InstancePools") or []
        ):
            total += wanted  # a fallback list holds quota for every type in it
    return total


def default_quota_regions(aws: Aws) -> list[str]:
    """The usual GPU regions and the configured one (AWS_REGION, AWS_DEFAULT_REGION, profile):
    a quota asked for without regions must cover where this machine deploys by default."""
    regions = set(DEFAULT_QUOTA_REGIONS)
    if aws.default_region:
        regions.add(aws.default_region)
    return sorted(regions)


def quota(
    instance_type: str, regions: list[str] | None = None, *, aws: Aws | None = None
) -> list[QuotaRow]:
    """One row per region (default: `default_quota_regions`): the quota, where it came from, how
    many are in use, how many free.

    A region that cannot be read gets its reason in `error`; missing credentials fail the call.
    """
    aws = aws or Aws()
    aws.require_credentials()
    name = quota_name(instance_type)
    rows = []
    for region in regions or default_quota_regions(aws):
        row = QuotaRow(region=region, instance_type=instance_type)
        errors: list[str] = []
        # The quota and the count are read apart: a refused quota read must not hide the count.
        try:
            with aws_errors(f"read the quota {name!r}", region, "servicequotas"):
                found, source = _find_quota(aws, region, name)
            if found is None:
                errors.append(
                    f"no quota named {name!r} (is {instance_type} offered for endpoints here?)"
                )
            else:
                row.quota = float(found.get("Value", 0.0))
                row.quota_source = source  # type: ignore[assignment]
                row.quota_code = found.get("QuotaCode")
        except UserError as exc:
            errors.append(str(exc))
        try:
            with aws_errors("count the instances endpoints use", region):
                row.in_use, unread = _held(aws, region, instance_type)
            row.in_use_note = _unread_note(unread)
        except UserError as exc:
            errors.append(str(exc))
        if row.quota is not None and row.in_use is not None:
            row.free = max(row.quota - row.in_use, 0.0)
        row.error = "; ".join(errors) or None
        rows.append(row)
    return rows


def _unread_note(unread: list[str]) -> str | None:
    if not unread:
        return None
    return (
        f"in use counts only the endpoints sagemeter could read; {len(unread)} "
        f"could not be: {', '.join(unread[:5])}{' …' if len(unread) > 5 else ''}"
    )


def endpoint_quotas(instance_types: list[str], region: str, *, aws: Aws) -> list[QuotaRow]:
    """`quota` for many instance types in one region, reading the region's quota lists and its
    endpoints once (not once per type). A read that fails is each row's `error`."""
    rows = [QuotaRow(region=region, instance_type=t) for t in instance_types]
    names = {quota_name(t): row for t, row in zip(instance_types, rows, strict=True)}
    quota_error: str | None = None
    try:
        with aws_errors("read the SageMaker endpoint quotas", region, "servicequotas"):
            client = aws.quotas(region)
            for operation, source in (
                ("list_service_quotas", "applied"),
                ("list_aws_default_service_quotas", "default"),
            ):
                pages = client.get_paginator(operation).paginate(ServiceCode="sagemaker")  # type: ignore[call-overload]
                for page in pages:
                    for found in page.get("Quotas", []):
                        row = names.get(str(found.get("QuotaName")))
                        if row is not None and row.quota is None:
                            row.quota = float(found.get("Value", 0.0))
                            row.quota_source = source  # type: ignore[assignment]
                            row.quota_code = found.get("QuotaCode")
    except UserError as exc:
        quota_error = str(exc)
    count_error: str | None = None
    holdings: list[tuple[dict[str, Any], dict[str, Any]]] = []
    unread: list[str] = []
    try:
        with aws_errors("count the instances endpoints use", region):
            holdings, unread = _holdings(aws, region)
    except UserError as exc:
        count_error = str(exc)
    for row in rows:
        errors = [e for e in (quota_error, count_error) if e]
        if quota_error is None and row.quota is None:
            errors.insert(
                0, f"no quota named {quota_name(row.instance_type)!r} (not offered here?)"
            )
        if count_error is None:
            row.in_use = sum(_held_by(e, c, row.instance_type) for e, c in holdings)
            row.in_use_note = _unread_note(unread)
        if row.quota is not None and row.in_use is not None:
            row.free = max(row.quota - row.in_use, 0.0)
        row.error = "; ".join(errors) or None
    return rows
