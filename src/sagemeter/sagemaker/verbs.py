"""SageMaker rules both faces share: which region a name means, the role, the env, and how a
deploy's image and placement read in one line.

The region rules themselves live in `sagemeter.sagemaker.region`, one order for all.

`label` arguments give the face's spelling of a parameter (`--region` on the CLI, `region` in an
MCP tool) so each message names what the person or assistant actually typed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from sagemeter import sagemaker as sm
from sagemeter.errors import UserError
from sagemeter.sagemaker.redact import is_secret_key, register_secret
from sagemeter.targets import SageMakerTarget, parse_target

ROLE_ENV = "SAGEMETER_ROLE_ARN"


def endpoint_region(
    text: str, region: str | None, aws: sm.Aws | None = None, *, label: str = "--region"
) -> tuple[str, str]:
    """NAME@REGION as given; NAME with `region`; else NAME where it is recorded, else the AWS
    configuration's region (AWS_REGION, AWS_DEFAULT_REGION, profile), as
    `sm.resolve_endpoint_region` decides."""
    if ":" in text.partition("@")[0]:  # a URL or an engine's PREFIX:…; no endpoint name has ':'
        raise UserError(f"{text!r} is not a SageMaker endpoint; write NAME@REGION")
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
    choice = sm.resolve_endpoint_region(target.name, region, aws or sm.Aws(), label=label)
    return target.name, choice.region


def deploy_region(region: str | None, aws: sm.Aws | None, *, label: str = "--region") -> str:
    """The region to deploy to: the one given, else AWS_REGION, AWS_DEFAULT_REGION, profile."""
    return sm.resolve_region(region, aws or sm.Aws(), label=label).region


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


def image_line(result: sm.DeployResult) -> str:
    """Which image ran and why: newest in the registry, pinned, or the fallback (and why)."""
    sources = {
        "registry": "the newest pinned vLLM SageMaker tag in the registry",
        "fallback": "the fallback tag",
        "--image-tag": "--image-tag",
        "--image": "--image",
    }
    source = sources.get(result.image_source or "", result.image_source or "?")
    digest = f"; {result.image_digest}" if result.image_digest else ""
    why = f": {result.image_note}" if result.image_note else ""
    return f"image {result.image} ({source}{why}){digest}"


def placed_text(result: sm.DeployResult) -> str:
    """`ml.g6.4xlarge x1, placed of ml.g6.xlarge / ml.g6.4xlarge, $1.6540/h per instance`."""
    placed = result.placed_instance_types
    types = " / ".join(placed or result.instance_types)
    if placed and len(result.instance_types) > 1:
        types += f", placed of {' / '.join(result.instance_types)}"
    if result.hourly_usd is not None:
        price = f", ${result.hourly_usd:,.4f}/h per instance"
    else:
        price = f", no price: {result.price_note}" if result.price_note else ""
    return f"{types} x{result.count}{price}"
