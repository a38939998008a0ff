"""Deploy one checkpoint: model -> endpoint config -> endpoint, wait, fall back across regions.

Every resource is tagged as sagemeter's (with the spec) and written to the ledger as `requested`
before its create call is sent, then updated with the ARN when the call returns: an interrupt at
any moment leaves a record `sagemeter list` shows. A capacity failure (an immediate
ResourceLimitExceeded, or an endpoint that fails with InsufficientInstanceCapacity after its
wait) is cleaned up once it can be deleted, and the next `--fallback-region` is tried.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, Field

from sagemeter.backends.sagemaker.aws import (
    Aws,
    aws_errors,
    error_code,
    error_message,
    explain,
    is_not_found,
    one_line,
)
from sagemeter.backends.sagemaker.delete import DeleteReport, remove, resource_tags
from sagemeter.backends.sagemaker.endpoint import (
    DEFAULT_POLL_S,
    FINAL_STATES,
    Progress,
    ProgressCallback,
    describe_endpoint,
    wait_until,
)
from sagemeter.backends.sagemaker.ledger import Ledger, LedgerRecord, ResourceKind
from sagemeter.backends.sagemaker.pricing import try_hourly_price
from sagemeter.backends.sagemaker.redact import redact, redact_env
from sagemeter.backends.sagemaker.spec import (
    CREATED_KEY,
    SPEC_DIGEST_KEY,
    DeploySpec,
    ResourceNames,
    container_environment,
    create_endpoint_config_request,
    create_endpoint_request,
    create_model_request,
    ownership_tags,
    resource_names,
)
from sagemeter.errors import UserError

DEFAULT_DEADLINE_S = 3600.0  # the article saw capacity failures arrive after ~30 min of Creating
# SageMaker's reads are eventually consistent: a resource just created may be "not found" for a
# while. So long, a missing endpoint config or endpoint means "not visible yet", not "gone".
VISIBILITY_S = 120.0
CAPACITY_CODES = frozenset(
    {"ResourceLimitExceeded", "InsufficientInstanceCapacity", "CapacityError"}
)
_CAPACITY_REASON = re.compile(
    r"InsufficientInstanceCapacity|CapacityError|ResourceLimitExceeded|insufficient\s+capacity"
    r"|provision requested ML compute capacity",
    re.IGNORECASE,
)


def is_capacity_failure(reason: str | None) -> bool:
    return bool(reason and _CAPACITY_REASON.search(reason))


class Attempt(BaseModel):
    region: str
    outcome: Literal["InService", "Failed", "capacity", "timed out"]
    reason: str | None = None


class DeployResult(BaseModel):
    name: str
    region: str
    status: str | None
    model_id: str
    instance_types: list[str]
    count: int
    image: str
    endpoint_arn: str | None = None
    create_to_inservice_minutes: float | None = None
    failure_reason: str | None = None
    timed_out: bool = False
    hourly_usd: float | None = None
    price_note: str | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    cleanups: list[DeleteReport] = Field(default_factory=list)
    note: str | None = None

    @property
    def in_service(self) -> bool:
        return self.status == "InService"


class PlannedRegion(BaseModel):
    """What `deploy` would send in one region (`--dry-run`), secrets masked."""

    region: str
    image: str
    requests: dict[str, dict[str, Any]]


def _hf_token(hf_token: str | None) -> str | None:
    """An explicit token wins; None takes HF_TOKEN from the environment; "" means none."""
    if hf_token is None:
        return os.environ.get("HF_TOKEN") or None
    return hf_token or None


def _requests(
    spec: DeploySpec,
    region: str,
    names: ResourceNames,
    env: dict[str, str],
    created_utc: str,
    token_set: bool,
) -> dict[str, dict[str, Any]]:
    tags = ownership_tags(spec, region, created_utc, token_set)
    return {
        "CreateModel": create_model_request(spec, region, names, env, tags),
        "CreateEndpointConfig": create_endpoint_config_request(spec, region, names, tags),
        "CreateEndpoint": create_endpoint_request(names, tags),
    }


def plan_deploy(spec: DeploySpec, *, hf_token: str | None = None) -> list[PlannedRegion]:
    """The create requests for every region deploy may try, without calling AWS."""
    token = _hf_token(hf_token)
    now = datetime.now(UTC)
    created = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    plans = []
    for region in spec.regions:
        names = resource_names(spec.name, now)
        env = redact_env(container_environment(spec, token))
        plans.append(
            PlannedRegion(
                region=region,
                image=spec.image_for(region),
                requests=_requests(spec, region, names, env, created, token is not None),
            )
        )
    return plans


def _preflight(spec: DeploySpec, aws: Aws, ledger: Ledger) -> None:
    """Refuse before creating anything: a name already taken, or left over, in any region."""
    for region in spec.regions:
        spec.image_for(region)  # an unknown region's image is a clear error now, not later
        existing = describe_endpoint(aws, spec.name, region)
        if existing is not None:
            raise UserError(
                f"an endpoint named {spec.name} already exists in {region} "
                f"({existing.get('EndpointStatus')}): choose another name, or delete it first "
                f"(`sagemeter delete {spec.name}@{region}` if sagemeter made it)"
            )
        record = ledger.get(region, spec.name)
        if record is not None and record.active:
            left = ", ".join(f"{r.kind} {r.name}" for r in record.leftovers())
            raise UserError(
                f"a previous deploy of {spec.name} in {region} is still recorded ({left}): "
                f"run `sagemeter delete {spec.name}@{region}` first"
            )


def _already_exists(exc: ClientError) -> bool:
    return "already exist" in error_message(exc).lower()


def _refused(exc: ClientError) -> bool:
    """AWS answered the one and only attempt with a 4xx: the create made nothing.

    A 5xx, or an error after botocore retried (the first attempt may have gone through before
    a timeout), leaves the resource's existence unknown.
    """
    metadata = exc.response.get("ResponseMetadata", {})
    status = int(metadata.get("HTTPStatusCode") or 0)
    return 400 <= status < 500 and not metadata.get("RetryAttempts")


def _create(
    record: LedgerRecord,
    ledger: Ledger,
    kind: ResourceKind,
    name: str,
    call: Callable[[], str],
    adopt: Callable[[], str | None],
) -> None:
    """Record the intent, send the create, record the outcome.

    "Already existing" after botocore resent a create whose first answer was lost: `adopt`
    returns the ARN when the existing resource is this deploy's own (same spec digest and
    creation stamp in its tags), and the create counts as done; otherwise it is not ours.
    """
    record.mark(kind, name, "requested")
    ledger.save(record)
    try:
        arn = call()
    except ClientError as exc:
        if _already_exists(exc):
            adopted = adopt()
            if adopted is None:
                record.mark(kind, name, "absent")  # what has that name is someone else's
                ledger.save(record)
                raise
            arn = adopted
        else:
            if _refused(exc):
                record.mark(kind, name, "absent")
                ledger.save(record)
            raise
    record.mark(kind, name, "created", arn)
    ledger.save(record)


def _adopt(
    aws: Aws,
    region: str,
    kind: ResourceKind,
    names: ResourceNames,
    tags: list[dict[str, str]],
) -> str | None:
    """The ARN of the existing `kind` of `names` when this very deploy created it, else None."""
    client = aws.sagemaker(region)
    try:
        if kind == "model":
            arn = str(client.describe_model(ModelName=names.model)["ModelArn"])
        elif kind == "endpoint-config":
            arn = str(
                client.describe_endpoint_config(EndpointConfigName=names.endpoint_config)[
                    "EndpointConfigArn"
                ]
            )
        else:
            endpoint = client.describe_endpoint(EndpointName=names.endpoint)
            if endpoint.get("EndpointConfigName") != names.endpoint_config:
                return None
            arn = str(endpoint["EndpointArn"])
    except ClientError as exc:
        if is_not_found(exc):
            return None
        raise
    wanted = {t["Key"]: t["Value"] for t in tags}
    found = {t["Key"]: t["Value"] for t in resource_tags(aws, region, arn)}
    same = all(found.get(key) == wanted.get(key) for key in (SPEC_DIGEST_KEY, CREATED_KEY))
    return arn if same else None


_CONFIG_NOT_VISIBLE = re.compile(r"could not find endpoint[ _]config", re.IGNORECASE)
T = TypeVar("T")


def _once_visible(
    call: Callable[[], T], missing: Callable[[ClientError], bool], window_s: float, poll_s: float
) -> T:
    """`call()`, repeated while AWS answers that what it needs is not visible yet (reads are
    eventually consistent), for at most `window_s`."""
    began = time.monotonic()
    while True:
        try:
            return call()
        except ClientError as exc:
            if not missing(exc) or time.monotonic() - began >= window_s:
                raise
        time.sleep(min(poll_s, 5.0))


def _cleanup(
    aws: Aws,
    ledger: Ledger,
    record: LedgerRecord,
    result: DeployResult,
    poll_s: float,
    on_progress: ProgressCallback | None,
) -> None:
    try:
        result.cleanups.append(
            remove(
                aws,
                ledger,
                record.name,
                record.region,
                record,
                poll_s=poll_s,
                on_progress=on_progress,
                only_this_deploy=True,
            )
        )
    except UserError as exc:
        result.note = (
            f"cleanup in {record.region} is incomplete ({exc}); it stays recorded: run "
            f"`sagemeter delete {record.name}@{record.region}`"
        )


def deploy(
    spec: DeploySpec,
    *,
    hf_token: str | None = None,
    on_progress: ProgressCallback | None = None,
    deadline_s: float | None = DEFAULT_DEADLINE_S,
    poll_s: float = DEFAULT_POLL_S,
    price_per_hour: float | None = None,
    aws: Aws | None = None,
    ledger: Ledger | None = None,
    visibility_s: float = VISIBILITY_S,
) -> DeployResult:
    """Deploy `spec`, trying each of its regions in turn while the failure is one of capacity.

    `hf_token=None` takes HF_TOKEN from the environment (pass "" for none). The result says where
    the endpoint ended up, how long create-to-InService took, or why it failed; `deadline_s` is
    our own limit on one region's wait (the endpoint then stays recorded, still Creating).
    """
    aws = aws or Aws()
    aws.require_credentials()
    ledger = ledger or Ledger()
    token = _hf_token(hf_token)
    _preflight(spec, aws, ledger)
    attempts: list[Attempt] = []
    result: DeployResult | None = None
    for index, region in enumerate(spec.regions):
        last = index == len(spec.regions) - 1
        result = _attempt(
            spec,
            region,
            token,
            aws,
            ledger,
            on_progress,
            deadline_s,
            poll_s,
            price_per_hour,
            last,
            visibility_s,
        )
        attempts.append(result.attempts[0])
        result.attempts = list(attempts)
        if result.attempts[-1].outcome != "capacity" or last:
            return result
        if on_progress:
            on_progress(
                Progress(
                    name=spec.name,
                    region=region,
                    phase="capacity: trying the next region",
                    status=result.status,
                    elapsed_s=0.0,
                    log_line=result.failure_reason,
                )
            )
    assert result is not None  # spec.regions is never empty
    return result


def _attempt(
    spec: DeploySpec,
    region: str,
    token: str | None,
    aws: Aws,
    ledger: Ledger,
    on_progress: ProgressCallback | None,
    deadline_s: float | None,
    poll_s: float,
    price_per_hour: float | None,
    last: bool,
    visibility_s: float = VISIBILITY_S,
) -> DeployResult:
    now = datetime.now(UTC)
    created_utc = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    names = resource_names(spec.name, now)
    env = container_environment(spec, token)
    requests = _requests(spec, region, names, env, created_utc, token is not None)
    record = LedgerRecord(
        name=spec.name,
        region=region,
        model_id=spec.model_id,
        instance_types=spec.instance_types,
        count=spec.count,
        image=spec.image_for(region),
        spec=spec.recordable(),
        created_utc=created_utc,
    )
    quote, why = try_hourly_price(
        spec.instance_type, region, price_per_hour=price_per_hour, aws=aws
    )
    record.hourly_usd = quote.usd_per_hour if quote else None
    ledger.save(record)
    result = DeployResult(
        name=spec.name,
        region=region,
        status=None,
        model_id=spec.model_id,
        instance_types=spec.instance_types,
        count=spec.count,
        image=record.image,
        hourly_usd=record.hourly_usd,
        price_note=quote.source if quote else why,
    )

    def progress(phase: str, status: str | None = None, elapsed: float = 0.0) -> None:
        if on_progress:
            on_progress(
                Progress(
                    name=spec.name, region=region, phase=phase, status=status, elapsed_s=elapsed
                )
            )

    client = aws.sagemaker(region)
    tags = requests["CreateModel"]["Tags"]

    def adopt(kind: ResourceKind) -> Callable[[], str | None]:
        return lambda: _adopt(aws, region, kind, names, tags)

    def create_endpoint() -> str:
        # The config just created may not be visible yet: see it first (botocore's CreateEndpoint
        # documentation advises DescribeEndpointConfig), and resend while AWS cannot find it.
        _once_visible(
            lambda: client.describe_endpoint_config(EndpointConfigName=names.endpoint_config),
            is_not_found,
            visibility_s,
            poll_s,
        )
        return _once_visible(
            lambda: str(client.create_endpoint(**requests["CreateEndpoint"])["EndpointArn"]),
            lambda exc: bool(_CONFIG_NOT_VISIBLE.search(error_message(exc))),
            visibility_s,
            poll_s,
        )

    began = time.monotonic()
    try:
        progress("creating model")
        _create(
            record,
            ledger,
            "model",
            names.model,
            lambda: client.create_model(**requests["CreateModel"])["ModelArn"],
            adopt("model"),
        )
        progress("creating endpoint config")
        _create(
            record,
            ledger,
            "endpoint-config",
            names.endpoint_config,
            lambda: client.create_endpoint_config(**requests["CreateEndpointConfig"])[
                "EndpointConfigArn"
            ],
            adopt("endpoint-config"),
        )
        progress("creating endpoint")
        _create(record, ledger, "endpoint", names.endpoint, create_endpoint, adopt("endpoint"))
    except ClientError as exc:
        code, reason = error_code(exc), one_line(error_message(exc))
        record.failure_reason = f"{code}: {reason}"
        ledger.save(record)
        _cleanup(aws, ledger, record, result, poll_s, on_progress)
        if code in CAPACITY_CODES and not last:
            result.attempts = [
                Attempt(region=region, outcome="capacity", reason=f"{code}: {reason}")
            ]
            result.failure_reason = f"{code}: {reason}"
            return result
        raise explain(exc, f"create {spec.name}", region) from None
    except BotoCoreError as exc:
        record.note = "a create call did not complete; what it made (if anything) is recorded"
        ledger.save(record)
        raise UserError(
            f"{explain(exc, f'create {spec.name}', region)}; anything it created is recorded: "
            f"run `sagemeter delete {spec.name}@{region}`"
        ) from None
    except KeyboardInterrupt:
        record.note = "interrupted during deploy"
        ledger.save(record)
        raise

    def on_status(status: str | None) -> None:
        record.endpoint_status = status
        ledger.save(record)

    visible = {"seen": False}
    waiting_since = time.monotonic()

    def finished(d: dict[str, Any] | None) -> bool:
        """A final state; or gone, once it was seen (or never visible after `visibility_s`)."""
        if d is not None:
            visible["seen"] = True
            return d.get("EndpointStatus") in FINAL_STATES
        return visible["seen"] or time.monotonic() - waiting_since >= visibility_s

    try:
        with aws_errors(f"wait for {spec.name}", region):
            description, reached = wait_until(
                aws,
                spec.name,
                region,
                done=finished,
                phase="creating",
                deadline_s=deadline_s,
                poll_s=poll_s,
                on_progress=on_progress,
                on_status=on_status,
            )
    except KeyboardInterrupt:
        record.note = "interrupted while waiting for InService: the endpoint may still be creating"
        ledger.save(record)
        raise
    result.endpoint_arn = record.resource("endpoint").arn if record.resource("endpoint") else None  # type: ignore[union-attr]
    if not reached:
        minutes = (deadline_s or 0) / 60
        record.note = (
            f"still {record.endpoint_status} when sagemeter stopped waiting ({minutes:.0f} min)"
        )
        ledger.save(record)
        result.status = record.endpoint_status
        result.timed_out = True
        result.attempts = [Attempt(region=region, outcome="timed out", reason=record.note)]
        result.note = (
            f"{spec.name} in {region} is still {result.status} after {minutes:.0f} min; it stays "
            f"recorded (`sagemeter list`), and `sagemeter delete {spec.name}@{region}` waits until "
            "it can be deleted"
        )
        return result
    if description is None:
        reason = (
            "the endpoint disappeared while it was being created"
            if visible["seen"]
            else f"the endpoint was never visible in the {visibility_s:.0f} s after CreateEndpoint"
        )
        record.failure_reason = reason
        ledger.save(record)
        _cleanup(aws, ledger, record, result, poll_s, on_progress)
        result.status, result.failure_reason = None, reason
        result.attempts = [Attempt(region=region, outcome="Failed", reason=reason)]
        return result
    status = str(description.get("EndpointStatus"))
    result.status = status
    if status == "InService":
        minutes = _create_to_inservice_minutes(description, time.monotonic() - began)
        record.in_service_utc = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        record.create_to_inservice_minutes = minutes
        ledger.save(record)
        result.create_to_inservice_minutes = minutes
        result.attempts = [Attempt(region=region, outcome="InService")]
        return result
    reason = redact(str(description.get("FailureReason") or f"endpoint status {status}"))
    record.failure_reason = reason
    ledger.save(record)
    capacity = is_capacity_failure(reason)
    _cleanup(aws, ledger, record, result, poll_s, on_progress)
    result.failure_reason = reason
    result.attempts = [
        Attempt(region=region, outcome="capacity" if capacity else "Failed", reason=reason)
    ]
    return result


def _create_to_inservice_minutes(description: dict[str, Any], local_s: float) -> float:
    """SageMaker's own clock (LastModifiedTime - CreationTime) when it has both; ours otherwise."""
    created, modified = description.get("CreationTime"), description.get("LastModifiedTime")
    if isinstance(created, datetime) and isinstance(modified, datetime) and modified > created:
        return round((modified - created).total_seconds() / 60.0, 2)
    return round(local_s / 60.0, 2)
