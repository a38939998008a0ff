"""SageMaker input rules both faces share: which region a name means, the role, the env.

`label` arguments give the face's spelling of a parameter (`--region` on the CLI, `region` in an
MCP tool) so each message names what the person or assistant actually typed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from sagemeter.backends import sagemaker as sm
from sagemeter.backends.sagemaker.redact import is_secret_key, register_secret
from sagemeter.errors import UserError
from sagemeter.targets import SageMakerTarget, parse_target

ROLE_ENV = "SAGEMETER_ROLE_ARN"


def endpoint_region(
    text: str, region: str | None, aws: sm.Aws | None = None, *, label: str = "--region"
) -> tuple[str, str]:
    """NAME@REGION as given; or NAME with a region, its recorded region, or the configured one."""
    if "@" in text:
        target = parse_target(text)
        if not isinstance(target, SageMakerTarget):
            raise UserError(f"{text!r} is not a SageMaker endpoint; write NAME@REGION")
        if region and region != target.region:
            raise UserError(f"{text} names region {target.region} but {label} says {region}")
        return target.name, target.region
    target = parse_target(f"{text}@{region or 'us-east-1'}")  # validates the name
    if not isinstance(target, SageMakerTarget):  # http://HOST or local:CHECKPOINT
        raise UserError(f"{text!r} is not a SageMaker endpoint; write NAME@REGION")
    if region:
        return target.name, region
    recorded = sm.Ledger().regions_of(target.name)
    if len(recorded) == 1:
        return target.name, recorded[0]
    if len(recorded) > 1:
        raise UserError(
            f"{text} is recorded in several regions ({', '.join(recorded)}): write NAME@REGION"
        )
    configured = (aws or sm.Aws()).default_region
    if configured:
        return target.name, configured
    raise UserError(f"{text}: no region given; write {text}@REGION or set AWS_REGION")


def deploy_region(region: str | None, aws: sm.Aws | None, *, label: str = "--region") -> str:
    """The region to deploy to: the one given, else the AWS configuration's."""
    chosen = region or (aws.default_region if aws else None) or os.environ.get("AWS_REGION")
    if not chosen:
        raise UserError(f"no region given: pass {label} or set AWS_REGION")
    return chosen


def execution_role(role: str | None, *, label: str = "--role ARN") -> str:
    """The execution role SageMaker assumes: the one given, else $SAGEMETER_ROLE_ARN."""
    chosen = role or os.environ.get(ROLE_ENV)
    if not chosen:
        raise UserError(
            "deploy needs an execution role SageMaker can assume: pass "
            f"{label} or set {ROLE_ENV} (docs/sagemaker.md#iam shows how to make one)"
        )
    return chosen


def container_env(env: Mapping[str, str]) -> dict[str, str]:
    """The container environment as given, its secret values remembered so they are masked."""
    for key, value in env.items():
        if not key:
            raise UserError("container environment keys must not be empty")
        if is_secret_key(key):
            register_secret(value)
    return dict(env)
