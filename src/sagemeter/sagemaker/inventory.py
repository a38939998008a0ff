"""What sagemeter has running: its endpoints per region, their age and cost so far, and orphans.

Two sources are joined: AWS (endpoints carrying sagemeter's ownership tag) and the local ledger
(everything this machine created, including resources of an interrupted deploy that never got as
far as an endpoint). An endpoint tagged as sagemeter's with no local record is an orphan: made on
another machine, or with another SAGEMETER_HOME, and still billing. With `all_endpoints`, every
other endpoint in the regions is listed too, marked as not sagemeter's.

The price is that of the instance type SageMaker placed (with InstancePools, not necessarily the
first one asked for); where there is no price, `price_note` says why.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError
from pydantic import BaseModel, Field

from sagemeter.errors import UserError
from sagemeter.sagemaker.aws import Aws, aws_errors, is_not_found
from sagemeter.sagemaker.endpoint import (
    describe_endpoint,
    instance_count_of,
    instance_types_of,
    placed_instance_types,
)
from sagemeter.sagemaker.ledger import Ledger, LedgerRecord
from sagemeter.sagemaker.pricing import PriceQuote, hourly_price, manual_quote, try_hourly_price
from sagemeter.sagemaker.quota import default_quota_regions
from sagemeter.sagemaker.region import placed_elsewhere
from sagemeter.sagemaker.spec import is_ours

# Statuses in which instances may be provisioned, so the hourly price may be running.
BILLING_STATES = {"Creating", "InService", "Updating", "SystemUpdating", "RollingBack", "Deleting"}


class EndpointInfo(BaseModel):
    name: str
    region: str
    status: str | None = Field(None, description="None: no such endpoint in AWS")
    ours: bool = Field(False, description="tagged as sagemeter's")
    recorded: bool = Field(False, description="in this machine's ledger")
    orphan: bool = Field(False, description="tagged as sagemeter's, but in no local record")
    instance_types: list[str] = Field(
        default_factory=list, description="the types placed when known, else those configured"
    )
    placed_instance_types: list[str] = Field(
        default_factory=list, description="the types SageMaker placed instances of"
    )
    instance_count: int | None = None
    model_id: str | None = None
    created_utc: str | None = None
    age_minutes: float | None = None
    hourly_usd: float | None = Field(None, description="per instance of the placed type, on demand")
    priced_instance_type: str | None = None
    cost_so_far_usd: float | None = Field(
        None, description="upper bound: count x hours since creation x hourly price"
    )
    price_note: str | None = Field(None, description="where the price is from, or why none")
    failure_reason: str | None = None
    leftovers: list[str] = Field(
        default_factory=list, description="recorded resources that may exist"
    )
    note: str | None = None


class Inventory(BaseModel):
    regions: list[str]
    endpoints: list[EndpointInfo]
    region_errors: dict[str, str] = Field(default_factory=dict)


def _iso(when: datetime | None) -> str | None:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if when else None


RUNNING_STATES = {"InService", "Creating", "Updating"}


def billing_lines(
    inventory: Inventory, delete_with: str = "`sagemeter sagemaker delete NAME@REGION`"
) -> list[str]:
    """What may be billing: sagemeter's endpoints (which delete stops), others' apart."""
    running = [i for i in inventory.endpoints if i.status in RUNNING_STATES]
    ours = [i for i in running if i.ours or i.recorded]
    others = len(running) - len(ours)
    lines = [f"{len(ours)} may be billing; {delete_with} stops each"] if ours else []
    if others:
        lines.append(
            f"{others} endpoint{' that is' if others == 1 else 's that are'} not sagemeter's "
            f"{'is' if others == 1 else 'are'} running (sagemeter will not delete "
            f"{'it' if others == 1 else 'them'})"
        )
    return lines


def _tag_map(aws: Aws, region: str, arn: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    for page in aws.sagemaker(region).get_paginator("list_tags").paginate(ResourceArn=arn):
        tags.update({t["Key"]: t.get("Value", "") for t in page.get("Tags", [])})
    return tags


def _priced_type(info: EndpointInfo) -> tuple[str | None, str | None]:
    """(the one type to price, None) or (None, why there is no single type to price)."""
    placed = sorted(set(info.placed_instance_types))
    if len(placed) == 1:
        return placed[0], None
    if placed:
        return None, f"instances of several types placed ({', '.join(placed)}): no one price"
    configured = list(dict.fromkeys(info.instance_types))
    if len(configured) == 1:
        return configured[0], None
    if configured:
        return None, (
            f"not known which of {' / '.join(configured)} SageMaker placed "
            f"(see `sagemeter sagemaker status {info.name}@{info.region}` once InService)"
        )
    return None, "instance type unknown"


def _price(
    info: EndpointInfo,
    record: LedgerRecord | None,
    price_per_hour: float | None,
    aws: Aws,
    cache: dict[tuple[str, str], tuple[PriceQuote | None, str | None]],
) -> None:
    instance_type, unknown = _priced_type(info)
    info.priced_instance_type = instance_type
    if price_per_hour is not None:
        info.hourly_usd, info.price_note = price_per_hour, "--price-per-hour"
    elif instance_type is None:
        info.price_note = unknown
    elif (
        record is not None
        and record.hourly_usd is not None
        and record.priced_instance_type in (None, instance_type)
    ):
        info.hourly_usd, info.price_note = record.hourly_usd, "recorded at deploy"
    else:
        key = (instance_type, info.region)
        if key not in cache:
            cache[key] = try_hourly_price(key[0], key[1], aws=aws)
        quote, why = cache[key]
        info.hourly_usd = quote.usd_per_hour if quote else None
        info.price_note = quote.source if quote else why
    if (
        info.hourly_usd is not None
        and info.age_minutes is not None
        and info.status in BILLING_STATES
    ):
        count = info.instance_count or 1
        info.cost_so_far_usd = round(info.hourly_usd * count * info.age_minutes / 60.0, 4)


def _from_aws(
    summary: dict[str, Any],
    description: dict[str, Any] | None,
    tags: dict[str, str],
    record: LedgerRecord | None,
    region: str,
) -> EndpointInfo:
    created = (description or summary).get("CreationTime")
    now = datetime.now(UTC)
    info = EndpointInfo(
        name=str(summary["EndpointName"]),
        region=region,
        status=str((description or summary).get("EndpointStatus")),
        ours=True,
        recorded=record is not None and record.active,
        model_id=tags.get("sagemeter:model-id"),
        created_utc=_iso(created),
        age_minutes=round((now - created).total_seconds() / 60.0, 1) if created else None,
        failure_reason=(description or {}).get("FailureReason"),
    )
    info.orphan = not info.recorded
    if record is not None and record.active and record.note:
        info.note = record.note
    configured = [t for t in tags.get("sagemeter:instance-types", "").split() if t]
    running = instance_types_of(description or {}, None)
    info.instance_types = running or configured
    info.placed_instance_types = placed_instance_types(description or {}) or (
        record.placed_instance_types if record is not None and record.active else []
    )
    count_tag = tags.get("sagemeter:count", "")
    info.instance_count = instance_count_of(description or {}, None) or (
        int(count_tag) if count_tag.isdigit() else None
    )
    if info.orphan:
        info.note = "orphan: tagged as sagemeter's but not in this machine's record"
    return info


def _from_record(record: LedgerRecord) -> EndpointInfo:
    return EndpointInfo(
        name=record.name,
        region=record.region,
        status=None,
        recorded=True,
        instance_types=record.placed_instance_types or record.instance_types,
        placed_instance_types=record.placed_instance_types,
        instance_count=record.count,
        model_id=record.model_id,
        created_utc=record.created_utc,
        failure_reason=record.failure_reason,
        leftovers=[f"{r.kind} {r.name} ({r.state})" for r in record.leftovers()],
        note=record.note or "no endpoint in AWS; recorded resources may remain",
    )


def default_regions(aws: Aws, ledger: Ledger) -> list[str]:
    """Every region in the ledger, the configured region, and the usual GPU regions."""
    return sorted(set(ledger.regions()) | set(default_quota_regions(aws)))


def _not_ours(
    aws: Aws, region: str, summary: dict[str, Any], description: dict[str, Any]
) -> EndpointInfo:
    """Someone else's endpoint, for `list --all`: what it runs and since when."""
    created = description.get("CreationTime")
    config: dict[str, Any] | None = None
    try:
        config = dict(
            aws.sagemaker(region).describe_endpoint_config(
                EndpointConfigName=description["EndpointConfigName"]
            )
        )
    except ClientError as exc:
        if not is_not_found(exc):
            raise
    return EndpointInfo(
        name=str(summary["EndpointName"]),
        region=region,
        status=str(description.get("EndpointStatus")),
        instance_types=instance_types_of(description, config),
        placed_instance_types=placed_instance_types(description),
        instance_count=instance_count_of(description, config) or None,
        created_utc=_iso(created),
        age_minutes=(
            round((datetime.now(UTC) - created).total_seconds() / 60.0, 1) if created else None
        ),
        failure_reason=description.get("FailureReason"),
        note="not sagemeter's",
    )


def list_endpoints(
    regions: list[str] | None = None,
    *,
    price_per_hour: float | None = None,
    with_prices: bool = True,
    all_endpoints: bool = False,
    aws: Aws | None = None,
    ledger: Ledger | None = None,
) -> Inventory:
    """sagemeter's endpoints in `regions` (default: see `default_regions`), orphans marked;
    with `all_endpoints`, every other endpoint there too (`ours` False)."""
    aws = aws or Aws()
    aws.require_credentials()
    ledger = ledger or Ledger()
    regions = regions or default_regions(aws, ledger)
    inventory = Inventory(regions=regions, endpoints=[])
    prices: dict[tuple[str, str], tuple[PriceQuote | None, str | None]] = {}
    active = {(r.region, r.name): r for r in ledger.active()}
    for region in regions:
        seen: set[str] = set()
        try:
            with aws_errors("list endpoints", region):
                paginator = aws.sagemaker(region).get_paginator("list_endpoints")
                for page in paginator.paginate():
                    for summary in page.get("Endpoints", []):
                        name = str(summary["EndpointName"])
                        try:
                            tags = _tag_map(aws, region, summary["EndpointArn"])
                            ours = is_ours([{"Key": k, "Value": v} for k, v in tags.items()])
                            if not ours and not all_endpoints:
                                continue
                            description = describe_endpoint(aws, name, region)
                            if description is not None and not ours:
                                info = _not_ours(aws, region, dict(summary), description)
                                if with_prices:
                                    _price(info, None, price_per_hour, aws, prices)
                                inventory.endpoints.append(info)
                                continue
                        except ClientError as exc:
                            if not is_not_found(exc):
                                raise
                            description = None
                        if description is None:
                            continue  # deleted since the listing: gone, not an error
                        seen.add(name)
                        record = active.get((region, name))
                        info = _from_aws(dict(summary), description, tags, record, region)
                        if record is not None:
                            info.leftovers = [
                                f"{r.kind} {r.name} ({r.state})" for r in record.leftovers()
                            ]
                        if with_prices:
                            _price(info, record, price_per_hour, aws, prices)
                        inventory.endpoints.append(info)
        except UserError as exc:
            inventory.region_errors[region] = str(exc)
            continue
        for (record_region, name), record in active.items():
            if record_region == region and name not in seen:
                inventory.endpoints.append(_from_record(record))
    return inventory


def endpoint_status(
    name: str,
    region: str,
    *,
    price_per_hour: float | None = None,
    aws: Aws | None = None,
    ledger: Ledger | None = None,
) -> EndpointInfo:
    """One endpoint's status, whoever made it (`ours` says whether sagemeter did)."""
    aws = aws or Aws()
    aws.require_credentials()
    ledger = ledger or Ledger()
    record = ledger.get(region, name)
    with aws_errors(f"read the status of {name}", region):
        description = describe_endpoint(aws, name, region)
        if description is None:
            if record is None or not record.active:
                elsewhere = placed_elsewhere(name, region, ledger)
                if elsewhere:
                    raise UserError(f"no endpoint {name} in {region}: {elsewhere}")
                raise UserError(f"no endpoint {name} in {region} (see `sagemeter sagemaker list`)")
            return _from_record(record)
        tags = _tag_map(aws, region, description["EndpointArn"])
        config: dict[str, Any] | None
        try:
            config = dict(
                aws.sagemaker(region).describe_endpoint_config(
                    EndpointConfigName=description["EndpointConfigName"]
                )
            )
        except ClientError as exc:
            if not is_not_found(exc):
                raise
            config = None
    info = _from_aws(description, description, tags, record, region)
    info.ours = is_ours([{"Key": k, "Value": v} for k, v in tags.items()])
    if not info.ours:
        info.orphan = False
        info.note = "not tagged as sagemeter's: sagemeter will not delete it"
    info.instance_types = instance_types_of(description, config) or info.instance_types
    info.placed_instance_types = placed_instance_types(description) or info.placed_instance_types
    info.instance_count = instance_count_of(description, config) or info.instance_count
    if record is not None:
        info.leftovers = [f"{r.kind} {r.name} ({r.state})" for r in record.leftovers()]
    _price(info, record, price_per_hour, aws, {})
    return info


def endpoint_price(
    name: str, region: str, *, price_per_hour: float | None = None, aws: Aws | None = None
) -> PriceQuote | None:
    """The hourly price of one instance of the type placed behind endpoint `name`, best effort."""
    ledger = Ledger()
    record = ledger.get(region, name) or next(
        (r for r in reversed(ledger.history()) if r.name == name and r.region == region), None
    )
    types = (record.placed_instance_types or record.instance_types) if record else []
    instance_type = (record.priced_instance_type if record else None) or (
        types[0] if types else None
    )
    if price_per_hour is not None:
        return manual_quote(instance_type or "?", region, price_per_hour)
    try:
        if instance_type is None:
            instance_type = endpoint_status(name, region, aws=aws).instance_types[0]
        return hourly_price(instance_type, region, aws=aws)
    except (UserError, IndexError):
        return None
