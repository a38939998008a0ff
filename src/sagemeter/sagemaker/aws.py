"""One boto3 session per caller, its clients, and AWS errors as one line a person can act on.

Nothing here prints. Every control-plane call goes through `aws_errors(...)`, which converts
botocore's exceptions into one line (what went wrong, what to do), with secrets redacted: a
`PlatformError` (exit 4) when AWS refused or failed, input (exit 2) when no credentials are set.
Endpoints come from boto3's own configuration, so `AWS_ENDPOINT_URL_<SERVICE>` (and profiles)
work as the AWS CLI documents them.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
    ReadTimeoutError,
    TokenRetrievalError,
)

from sagemeter import __version__
from sagemeter.errors import PlatformError, UserError
from sagemeter.redaction import register_secret
from sagemeter.sagemaker.redact import redact
from sagemeter.transport.aws_session import new_session
from sagemeter.transport.request import has_control
from sagemeter.transport.upstream import MAX_CHARS
from sagemeter.transport.upstream import one_line as upstream_one_line

if TYPE_CHECKING:
    import boto3.session
    from mypy_boto3_ecr import ECRClient
    from mypy_boto3_iam import IAMClient
    from mypy_boto3_logs import CloudWatchLogsClient
    from mypy_boto3_pricing import PricingClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_service_quotas import ServiceQuotasClient

PRICING_REGION = "us-east-1"  # the Price List API answers from us-east-1 (and two others)
IAM_REGION = "us-east-1"  # IAM is global; its requests are signed for us-east-1
# Where the AWS configuration names a region, in the AWS CLI's order. botocore itself reads only
# AWS_DEFAULT_REGION and the profile, so AWS_REGION alone would be ignored without this.
REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")
IAM_DOC = "docs/sagemaker.md#iam"

# Control-plane calls are idempotent reads or creates guarded by our own name checks: let botocore
# retry throttling and 5xx a few times with its standard backoff.
CONTROL_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 5},
    connect_timeout=10,
    read_timeout=60,
    user_agent_extra=f"sagemeter/{__version__}",
)

_CREDENTIAL_CODES = {
    "ExpiredToken",
    "ExpiredTokenException",
    "RequestExpired",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "SignatureDoesNotMatch",
    "InvalidSignatureException",
    "IncompleteSignature",
    "AuthFailure",
}
_DENIED_CODES = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"}
_THROTTLE_CODES = {"ThrottlingException", "Throttling", "TooManyRequestsException"}
_NOT_AUTHORIZED = re.compile(
    r"not authorized to perform:?\s+(?P<action>[A-Za-z0-9-]+:[A-Za-z0-9*]+)"
)


CREDENTIAL_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
)


def _check_credential_variables() -> None:
    """Credentials in the environment that could not go in a header: one line as the session
    is made, before any work (a profile file's are checked by `Aws.hold_credentials`)."""
    for name in CREDENTIAL_VARIABLES:
        if has_control(os.environ.get(name, "")):
            raise UserError(
                f"{name} holds a control character (CR, LF, tab or similar), which cannot go "
                "in an HTTP header; check how it was set (the value is not shown)"
            )


class Aws:
    """A boto3 session and its clients, made once per (service, region) and shared by threads."""

    def __init__(self, session: boto3.session.Session | None = None, profile: str | None = None):
        _check_credential_variables()
        with aws_errors("open the AWS session"):
            self.session = session or new_session(profile)
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self._credentials_held = False

    @property
    def default_region(self) -> str | None:
        """The region the AWS configuration names: AWS_REGION, AWS_DEFAULT_REGION, the profile."""
        found = self.configured_region()
        return found[0] if found else None

    def configured_region(self) -> tuple[str, str] | None:
        """(region, where it came from) from the AWS configuration, or None when it names none."""
        for variable in REGION_VARIABLES:
            value = os.environ.get(variable, "").strip()
            if value:
                return value, variable
        profile = self.session.region_name  # AWS_DEFAULT_REGION is unset here: the profile's
        return (profile, f"profile {self.session.profile_name}") if profile else None

    def require_credentials(self) -> None:
        """Fail early, with the fix, when no credentials can be found at all."""
        with aws_errors("find AWS credentials"):
            credentials = self.session.get_credentials()
        if credentials is None:
            raise UserError(
                "no AWS credentials found: run `aws configure` (or `aws sso login`), "
                "or set AWS_PROFILE / AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            )

    def hold_credentials(self) -> None:
        """The credentials this session signs with become secrets of this process (no output
        shows them, also when they come from a profile file rather than the environment); one
        holding a control character would break the request's headers: one line, not shown."""
        if self._credentials_held:
            return
        with aws_errors("find AWS credentials"):
            credentials = self.session.get_credentials()
            frozen = credentials.get_frozen_credentials() if credentials is not None else None
        if frozen is None:
            self._credentials_held = True
            return
        for label, value in (
            ("access key id", frozen.access_key),
            ("secret access key", frozen.secret_key),
            ("session token", frozen.token),
        ):
            register_secret(value)
            if value and has_control(value):
                raise UserError(
                    f"the AWS {label} holds a control character (CR, LF, tab or similar), "
                    "which cannot go in an HTTP header; check how it was set (the value is not "
                    "shown)"
                )
        self._credentials_held = True

    def client(self, service: str, region: str, config: Config | None = None) -> Any:
        key = (service, region)
        self.hold_credentials()
        with self._lock:
            if key not in self._clients:
                with aws_errors(f"create the {service} client", region):
                    self._clients[key] = self.session.client(
                        service,  # type: ignore[call-overload]
                        region_name=region,
                        config=config or CONTROL_CONFIG,
                    )
            return self._clients[key]

    def sagemaker(self, region: str) -> SageMakerClient:
        client: SageMakerClient = self.client("sagemaker", region)
        return client

    def logs(self, region: str) -> CloudWatchLogsClient:
        client: CloudWatchLogsClient = self.client("logs", region)
        return client

    def quotas(self, region: str) -> ServiceQuotasClient:
        client: ServiceQuotasClient = self.client("service-quotas", region)
        return client

    def ecr(self, region: str) -> ECRClient:
        client: ECRClient = self.client("ecr", region)
        return client

    def iam(self) -> IAMClient:
        client: IAMClient = self.client("iam", IAM_REGION)
        return client

    def pricing(self) -> PricingClient:
        client: PricingClient = self.client("pricing", PRICING_REGION)
        return client


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def error_message(exc: ClientError) -> str:
    message = str(exc.response.get("Error", {}).get("Message", "")) or str(exc)
    return one_line(message)


def one_line(text: str, limit: int = MAX_CHARS) -> str:
    """Secrets masked, then as every upstream error is shown (transport/upstream.py): HTML and
    repeats dropped, whitespace collapsed, cut to `limit` characters."""
    return upstream_one_line(redact(text), limit)


def is_not_found(exc: ClientError) -> bool:
    """SageMaker says 'not found' as a ValidationException; Logs as ResourceNotFoundException."""
    code = error_code(exc)
    if code in {"ResourceNotFound", "ResourceNotFoundException", "NoSuchResourceException"}:
        return True
    message = error_message(exc).lower()
    return code in {"ValidationException", "ValidationError"} and (
        "could not find" in message or "does not exist" in message or "not found" in message
    )


def explain(
    exc: BaseException, action: str, region: str | None = None, service: str = "sagemaker"
) -> UserError:
    """The one line a person sees for an AWS failure while doing `action`: a `PlatformError`
    when AWS refused or failed (or could not be reached), the root (input: exit 2) when the local
    AWS configuration is missing credentials, a profile or a region.

    `service` is the IAM prefix of the call (sagemaker, logs, servicequotas, pricing), so an
    access-denied line names the exact permission to grant.
    """
    where = f" in {region}" if region else ""
    if isinstance(exc, ClientError):
        code, message = error_code(exc), error_message(exc)
        operation = getattr(exc, "operation_name", "") or ""
        if code in _CREDENTIAL_CODES:
            return PlatformError(
                f"AWS rejected the credentials while trying to {action} ({code}): refresh them "
                "(`aws sso login`, or `aws configure`) and try again"
            )
        if code in _DENIED_CODES:
            # The message names the action really refused (iam:PassRole during CreateModel, say).
            named = _NOT_AUTHORIZED.search(message)
            permission = (
                named["action"]
                if named
                else f"{service}:{operation}"
                if operation
                else "the request"
            )
            return PlatformError(
                f"AWS denied {permission}{where} while trying to {action}: {message} "
                f"(the permissions sagemeter needs are listed in {IAM_DOC})"
            )
        if code in _THROTTLE_CODES:
            return PlatformError(
                f"AWS throttled the request to {action}{where}: wait a minute and retry"
            )
        if code == "ResourceLimitExceeded":
            return PlatformError(
                f"quota exceeded{where} while trying to {action}: {message} "
                "(see `sagemeter sagemaker quota INSTANCE_TYPE`; raise it in the Service Quotas "
                "console)"
            )
        return PlatformError(f"AWS could not {action}{where} ({code or 'error'}): {message}")
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return UserError(
            "no usable AWS credentials: run `aws configure` (or `aws sso login`), "
            "or set AWS_PROFILE / AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        )
    if isinstance(exc, TokenRetrievalError):
        return UserError(
            f"the AWS SSO session has expired: run `aws sso login` ({one_line(str(exc))})"
        )
    if isinstance(exc, ProfileNotFound):
        return UserError(f"{one_line(str(exc))}: check AWS_PROFILE or ~/.aws/config")
    if isinstance(exc, NoRegionError):
        return UserError("no AWS region given: pass --region or set AWS_REGION")
    if isinstance(exc, (EndpointConnectionError, ConnectTimeoutError)):
        return PlatformError(
            f"cannot reach AWS{where} while trying to {action} ({one_line(str(exc), 160)}): "
            "check the region name and the network"
        )
    if isinstance(exc, ReadTimeoutError):
        return PlatformError(f"AWS did not answer in time while trying to {action}{where}: retry")
    if isinstance(exc, BotoCoreError):
        return PlatformError(f"could not {action}{where}: {one_line(str(exc))}")
    return UserError(f"could not {action}{where}: {one_line(str(exc))}")


@contextmanager
def aws_errors(
    action: str, region: str | None = None, service: str = "sagemaker"
) -> Iterator[None]:
    """Turn any botocore failure inside the block into a `UserError` about `action`."""
    try:
        yield
    except UserError:
        raise
    except (ClientError, BotoCoreError) as exc:
        raise explain(exc, action, region, service) from None
