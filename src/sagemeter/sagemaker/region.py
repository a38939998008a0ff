"""Which region a SageMaker command means, decided here for every CLI verb and MCP tool.

The order: the region given (`--region`, `NAME@REGION`); then, for an endpoint name, the region
this machine's record says a deploy actually placed it in (after a capacity fallback that is not
the region first asked for); then `AWS_REGION`, `AWS_DEFAULT_REGION` and the profile's region.
botocore reads only the last two, so a command that left the choice to boto3 would ignore
`AWS_REGION` (the variable the AWS CLI documents first).
"""

from __future__ import annotations

from pydantic import BaseModel

from sagemeter.errors import UserError
from sagemeter.sagemaker.aws import Aws
from sagemeter.sagemaker.ledger import Ledger, LedgerRecord
from sagemeter.targets import AWS_REGION_NAME


class RegionChoice(BaseModel):
    region: str
    source: str  # "given", "recorded", "AWS_REGION", "AWS_DEFAULT_REGION", "profile NAME"


def _checked(region: str, source: str) -> RegionChoice:
    if not AWS_REGION_NAME.match(region):
        where = "" if source == "given" else f" ({source})"
        raise UserError(f"{region!r}{where} is not an AWS region such as us-east-2")
    return RegionChoice(region=region, source=source)


def configured_region(aws: Aws) -> RegionChoice | None:
    """AWS_REGION, AWS_DEFAULT_REGION, then the profile's region; None when none is set."""
    found = aws.configured_region()
    return _checked(*found) if found else None


def resolve_region(given: str | None, aws: Aws, *, label: str = "--region") -> RegionChoice:
    """The region for a command about no particular endpoint (deploy, price)."""
    if given:
        return _checked(given, "given")
    configured = configured_region(aws)
    if configured is None:
        raise UserError(f"no region given: pass {label} or set AWS_REGION")
    return configured


def _live(record: LedgerRecord) -> bool:
    """Its endpoint may exist: the create was sent and nothing has deleted it since."""
    endpoint = record.resource("endpoint")
    return endpoint is not None and endpoint.may_exist


def recorded_region(name: str, ledger: Ledger) -> str | None:
    """Where this machine's record says endpoint `name` is (or last was); None if never here.

    An active record wins (the one whose endpoint may exist, when a failed attempt left parts
    in another region); else the newest finished deployment whose endpoint was created, so
    `logs NAME` still finds a deleted endpoint's log.
    """
    active = [record for record in ledger.active() if record.name == name]
    live = [record for record in active if _live(record)]
    candidates = live or active
    if len(candidates) == 1:
        return candidates[0].region
    if candidates:
        regions = ", ".join(sorted(record.region for record in candidates))
        raise UserError(f"{name} is recorded in several regions ({regions}): write {name}@REGION")
    finished = [
        record
        for record in ledger.history()
        if record.name == name and (endpoint := record.resource("endpoint")) and endpoint.arn
    ]
    return max(finished, key=lambda r: r.created_utc).region if finished else None


def resolve_endpoint_region(
    name: str, given: str | None, aws: Aws, ledger: Ledger | None = None, *, label: str = "--region"
) -> RegionChoice:
    """The region for a command about endpoint `name`: given, recorded, then configured."""
    if given:
        return _checked(given, "given")
    known = known_endpoint_region(name, aws, ledger)
    if known is None:
        raise UserError(
            f"{name}: no region given; write {name}@REGION, pass {label}, or set AWS_REGION"
        )
    return known


def known_endpoint_region(name: str, aws: Aws, ledger: Ledger | None = None) -> RegionChoice | None:
    """Steps 2 and 3 for a bare endpoint name: where this machine placed it, else the configured
    region; None when neither says (a measure target has no --region to ask for)."""
    recorded = recorded_region(name, ledger or Ledger())
    if recorded:
        return RegionChoice(region=recorded, source="recorded")
    return configured_region(aws)


def placed_elsewhere(name: str, region: str, ledger: Ledger | None = None) -> str | None:
    """When `name` is not in `region` but this machine placed it elsewhere, the sentence that
    says where (and how to name it); None otherwise."""
    others = [
        record
        for record in (ledger or Ledger()).active()
        if record.name == name and record.region != region
    ]
    if not others:
        return None
    record = max(others, key=lambda r: (_live(r), r.created_utc))
    fallback = record.spec.get("region") not in (None, record.region)
    how = " (a capacity fallback region)" if fallback else ""
    return (
        f"sagemeter placed {name} in {record.region}{how}: use {name}@{record.region}, "
        f"or {name} alone"
    )
