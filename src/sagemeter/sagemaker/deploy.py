"""Deploy one checkpoint: model -> endpoint config -> endpoint, wait, fall back across regions.

Every resource is tagged as sagemeter's (with the spec) and written to the ledger as `requested`
before its create call is sent, then updated with the ARN when the call returns: an interrupt at
any moment leaves a record `sagemeter sagemaker list` shows. A capacity failure (an immediate
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

from sagemeter.errors import PlatformError, UserError, reworded
from sagemeter.sagemaker.aws import (
    Aws,
    aws_errors,
    error_code,
    error_message,
    explain,
    is_not_found,
    one_line,
)
from sagemeter.sagemaker.delete import DeleteReport, remove, resource_tags
from sagemeter.sagemaker.endpoint import (
    DEFAULT_POLL_S,
    FINAL_STATES,
    Progress,
    ProgressCallback,
    deployed_image,
    describe_endpoint,
    placed_instance_types,
    wait_until,
)
from sagemeter.sagemaker.image import ImageChoice, choose_image, image_account
from sagemeter.sagemaker.ledger import Ledger, LedgerRecord, ResourceKind
from sagemeter.sagemaker.pricing import try_hourly_price
from sagemeter.sagemaker.redact import redact, redact_env
from sagemeter.sagemaker.spec import (
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

DEFAULT_DEADLINE_S = 3600.0  # the article saw capacity failures arrive after ~30 min of Creating
# IAM is eventually consistent: SageMaker may not be able to assume a role made seconds ago, and
# says so as a ValidationException to CreateModel (which then created nothing). So long, resend.
ROLE_PROPAGATION_S = 120.0
_ROLE_NOT_READY = re.compile(r"could not assume role|unable to assume the role", re.IGNORECASE)
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
    image_source: str | None = Field(None, description="registry, fallback, --image-tag, --image")
    image_note: str | None = Field(None, description="why the fallback image was used")
    image_digest: str | None = Field(None, description="repository@sha256:… of what runs")
    placed_instance_types: list[str] = Field(
        default_factory=list, description="the types SageMaker placed (of InstancePools)"
    )
    endpoint_arn: str | None = None
    create_to_inservice_minutes: float | None = None
    failure_reason: str | None = None
    timed_out: bool = False
    hourly_usd: float | None = Field(None, description="per instance of the placed type")
    priced_instance_type: str | None = None
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
    image_source: str
    image_note: str | None = None
    requests: dict[str, dict[str, Any]]


def _hf_token(hf_token: str | None) -> str | None:
    """An explicit token wins; None takes HF_TOKEN from the environment; "" means none."""
    if hf_token is None:
        return os.environ.get("HF_TOKEN") or None
    return hf_token or None


def _requests(
    spec: DeploySpec,
    region: str,
    image: str,
    names: ResourceNames,
    env: dict[str, str],
    created_utc: str,
    token_set: bool,
) -> dict[str, dict[str, Any]]:
    tags = ownership_tags(spec, region, image, created_utc, token_set)
    return {
        "CreateModel": create_model_request(spec, image, names, env, tags),
        "CreateEndpointConfig": create_endpoint_config_request(spec, image, names, tags),
        "CreateEndpoint": create_endpoint_request(names, tags),
    }


def _choose_image(spec: DeploySpec, region: str, aws: Aws | None) -> ImageChoice:
    return choose_image(region, image=spec.image, image_tag=spec.image_tag, aws=aws)


def plan_deploy(
    spec: DeploySpec, *, hf_token: str | None = None, aws: Aws | None = None
) -> list[PlannedRegion]:
    """The create requests for every region deploy may try; nothing is created.

    With `aws`, the image is looked up in the registry as deploy would (a read); without, the
    fallback image is shown and the plan says so.
    """
    token = _hf_token(hf_token)
    now = datetime.now(UTC)
    created = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    plans = []
    for region in spec.regions:
        names = resource_names(spec.name, now)
        env = redact_env(container_environment(spec, token))
        image = _choose_image(spec, region, aws)
        plans.append(
            PlannedRegion(
                region=region,
                image=image.uri,
                image_source=image.source,
                image_note=image.note,
                requests=_requests(spec, region, image.uri, names, env, created, token is not None),
            )
        )
    return plans


def _preflight(spec: DeploySpec, aws: Aws, ledger: Ledger) -> None:
    """Refuse before creating anything: a name already taken, or left over, in any region, or
    still deployed from this machine in a region not asked for now (two would bill)."""
    for other in ledger.active():
        endpoint = other.resource("endpoint")
        if (
            other.name == spec.name
            and other.region not in spec.regions
            and endpoint is not None
            and endpoint.may_exist
        ):
            raise UserError(
                f"{spec.name} is still deployed in {other.region} (recorded): delete it first "
                f"(`sagemeter sagemaker delete {spec.name}@{other.region}`), or choose another name"
            )
    for region in spec.regions:
        if not spec.image:
            image_account(region)  # an unknown region's image is a clear error now, not later
        existing = describe_endpoint(aws, spec.name, region)
        if existing is not None:
            raise UserError(
                f"an endpoint named {spec.name} already exists in {region} "
                f"({existing.get('EndpointStatus')}): choose another name, or delete it first "
                f"(`sagemeter sagemaker delete {spec.name}@{region}` if sagemeter made it)"
            )
        record = ledger.get(region, spec.name)
        if record is not None and record.active:
            left = ", ".join(f"{r.kind} {r.name}" for r in record.leftovers())
            raise UserError(
                f"a previous deploy of {spec.name} in {region} is still recorded ({left}): "
                f"run `sagemeter sagemaker delete {spec.name}@{region}` first"
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
            f"`sagemeter sagemaker delete {record.name}@{record.region}`"
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
    role_wait_s: float = ROLE_PROPAGATION_S,
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
    cleanups: list[DeleteReport] = []
    result: DeployResult | None = None
    for index, region in enumerate(spec.regions):
        last = index == len(spec.regions) - 1
        try:
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
                role_wait_s,
            )
        except UserError as exc:
            if not attempts:
                raise
            raise reworded(
                exc, f"{exc} (before that: {_attempts_summary(attempts, cleanups)})"
            ) from None
        attempts.append(result.attempts[0])
        cleanups.extend(result.cleanups)
        result.attempts = list(attempts)
        result.cleanups = list(cleanups)
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


def _attempts_summary(attempts: list[Attempt], cleanups: list[DeleteReport]) -> str:
    """Earlier attempts in one phrase: "us-east-1: capacity, endpoint deleted, …"."""
    parts = []
    for attempt in attempts:
        removed = [
            f"{step.kind} {step.outcome}"
            for report in cleanups
            if report.region == attempt.region
            for step in report.steps
        ]
        parts.append(", ".join([f"{attempt.region}: {attempt.outcome}", *removed]))
    return "; ".join(parts)


def _price_placed(
    record: LedgerRecord,
    result: DeployResult,
    placed: list[str],
    price_per_hour: float | None,
    aws: Aws,
) -> None:
    """Price what SageMaker placed: with InstancePools it may not be the first type asked for."""
    if not placed or price_per_hour is not None or placed[0] == record.priced_instance_type:
        return
    quote, why = try_hourly_price(placed[0], record.region, aws=aws)
    record.hourly_usd = quote.usd_per_hour if quote else None
    record.priced_instance_type = placed[0]
    record.price_note = quote.source if quote else why
    result.hourly_usd, result.priced_instance_type = record.hourly_usd, placed[0]
    result.price_note = record.price_note


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
    role_wait_s: float = ROLE_PROPAGATION_S,
) -> DeployResult:
    if on_progress:
        on_progress(
            Progress(
                name=spec.name,
                region=region,
                phase="choosing the image",
                status=None,
                elapsed_s=0.0,
            )
        )
    image = _choose_image(spec, region, aws)
    now = datetime.now(UTC)
    created_utc = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    names = resource_names(spec.name, now)
    env = container_environment(spec, token)
    requests = _requests(spec, region, image.uri, names, env, created_utc, token is not None)
    record = LedgerRecord(
        name=spec.name,
        region=region,
        model_id=spec.model_id,
        instance_types=spec.instance_types,
        count=spec.count,
        image=image.uri,
        image_source=image.source,
        image_digest=image.pinned_uri,
        spec=spec.recordable(),
        created_utc=created_utc,
    )
    quote, why = try_hourly_price(
        spec.instance_type, region, price_per_hour=price_per_hour, aws=aws
    )
    record.hourly_usd = quote.usd_per_hour if quote else None
    record.priced_instance_type = spec.instance_type
    record.price_note = quote.source if quote else why
    ledger.save(record)
    result = DeployResult(
        name=spec.name,
        region=region,
        status=None,
        model_id=spec.model_id,
        instance_types=spec.instance_types,
        count=spec.count,
        image=record.image,
        image_source=image.source,
        image_note=image.note,
        image_digest=record.image_digest,
        hourly_usd=record.hourly_usd,
        priced_instance_type=record.priced_instance_type,
        price_note=record.price_note,
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

    def role_not_ready(exc: ClientError) -> bool:
        waiting = bool(_ROLE_NOT_READY.search(error_message(exc)))
        if waiting:
            progress("waiting until SageMaker can assume the execution role")
        return waiting

    def create_model() -> str:
        return _once_visible(
            lambda: str(client.create_model(**requests["CreateModel"])["ModelArn"]),
            role_not_ready,
            role_wait_s,
            poll_s,
        )

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
            create_model,
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
        raise PlatformError(
            f"{explain(exc, f'create {spec.name}', region)}; anything it created is recorded: "
            f"run `sagemeter sagemaker delete {spec.name}@{region}`"
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
            "recorded (`sagemeter sagemaker list`), and "
            f"`sagemeter sagemaker delete {spec.name}@{region}` waits until it can be deleted"
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
        record.image_digest = deployed_image(description) or record.image_digest
        record.placed_instance_types = placed_instance_types(description)
        _price_placed(record, result, record.placed_instance_types, price_per_hour, aws)
        ledger.save(record)
        result.image_digest = record.image_digest
        result.placed_instance_types = record.placed_instance_types
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
