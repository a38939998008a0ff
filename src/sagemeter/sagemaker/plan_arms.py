"""The SageMaker side of an experiment's plan: each `[arm.sagemaker]` arm's endpoint name and
deploy spec, checked before anything starts, and the checks that its endpoint name is free.

The deploy, wait, fallback, price and delete themselves are `sagemeter.sagemaker`'s,
the same calls `sagemeter sagemaker deploy` and `sagemeter sagemaker delete` make
(platform.py drives them for a run).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from sagemeter import sagemaker as sm
from sagemeter.errors import ManyProblems, UserError
from sagemeter.sagemaker.endpoint import describe_endpoint
from sagemeter.sagemaker.plan_table import SageMakerArm
from sagemeter.sagemaker.verbs import container_env, execution_role

if TYPE_CHECKING:
    from sagemeter.experiment.plan import Arm, Plan

# DeploySpec's field → the plan's key in [arm.sagemaker].
_PLAN_KEYS = {
    "name": "endpoint",
    "model_id": "model",
    "role_arn": "role",
    "inference_ami_version": "inference_ami",
    "startup_timeout_s": "startup_timeout",
    "download_timeout_s": "download_timeout",
    "provision_timeout_s": "provision_timeout",
}


def arm_key(arm: Arm) -> str:
    return f'arm "{arm.name}".sagemaker'


def table_of(arm: Arm) -> SageMakerArm:
    """The arm's `[arm.sagemaker]` table."""
    table = arm.table
    assert isinstance(table, SageMakerArm), f"arm {arm.name} is not deployed on SageMaker"
    return table


def endpoint_name(plan: Plan, arm: Arm) -> str:
    """The SageMaker endpoint an arm deploys: its own `endpoint`, else PLAN-ARM made valid."""
    table = table_of(arm)
    if table.endpoint:
        return table.endpoint
    raw = re.sub(r"[^A-Za-z0-9]+", "-", f"{plan.name}-{arm.name}")
    return raw.strip("-")[:63].rstrip("-")


def deploy_spec(plan: Plan, arm: Arm, aws: sm.Aws) -> sm.DeploySpec:
    """The DeploySpec `sagemeter sagemaker deploy` would build from this arm; a problem names
    its key."""
    sage = table_of(arm)
    key = arm_key(arm)
    region = sm.resolve_region(sage.region, aws, label=f"{key}.region").region
    role = execution_role(sage.role_arn, label=f"{key}.role")
    fields: dict[str, Any] = {
        "name": endpoint_name(plan, arm),
        "model_id": sage.model,
        "region": region,
        "role_arn": role,
        "instance_type": sage.instance_type,
        "fallback_instance_types": sage.fallback_instance_types,
        "fallback_regions": sage.fallback_regions,
        "env": container_env(sage.env),
        "image": sage.image,
        "image_tag": sage.image_tag,
        "max_model_len": sage.max_model_len,
        "gpu_memory_utilization": sage.gpu_memory_utilization,
        "count": sage.count,
        "inference_ami_version": sage.inference_ami,
        "startup_timeout_s": sage.startup_timeout,
        "download_timeout_s": sage.download_timeout,
        "provision_timeout_s": sage.provision_timeout,
    }
    try:
        sm.DeploySpec(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        where = f"{key}.{_PLAN_KEYS.get(field, field)}" if field else key
        message = str(first["msg"]).removeprefix("Value error, ")
        message = message.replace("--env ", "env ").replace("--", "")
        raise UserError(f"{where}: {message}") from None
    try:
        return sm.make_spec(**fields)
    except UserError as exc:
        raise UserError(f"{key}: {str(exc).removeprefix('deploy ')}") from None


def check_names_free(specs: dict[str, sm.DeploySpec], aws: sm.Aws, ledger: sm.Ledger) -> None:
    """Before a new run creates anything: no endpoint of an arm's name exists, in any region the
    arm may use, and none is still recorded from an earlier deploy. Every taken name is named."""
    problems: list[str] = []
    for arm_name, spec in specs.items():
        for region in spec.regions:
            existing = describe_endpoint(aws, spec.name, region)
            if existing is not None:
                problems.append(
                    f'arm "{arm_name}": an endpoint named {spec.name} already exists in {region} '
                    f"({existing.get('EndpointStatus')}): set `endpoint` in [arm.sagemaker] to "
                    "another name, or delete it first "
                    f"(`sagemeter sagemaker delete {spec.name}@{region}`)"
                )
                continue
            record = ledger.get(region, spec.name)
            if record is not None and record.active:
                problems.append(
                    f'arm "{arm_name}": a deploy of {spec.name} in {region} is still recorded: '
                    f"run `sagemeter sagemaker delete {spec.name}@{region}` first "
                    "(`sagemeter sagemaker list` shows it)"
                )
    if len(problems) == 1:
        raise UserError(problems[0])
    if problems:
        raise ManyProblems("plan", problems)
