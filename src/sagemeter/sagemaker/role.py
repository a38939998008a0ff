"""`sagemeter sagemaker role create NAME`: the execution role SageMaker assumes for
sagemeter's endpoints.

It grants the least the AWS vLLM container needs: pull its image from the Deep Learning Containers
registries, write its log to `/aws/sagemaker/Endpoints/*` and its metrics to that namespace.
Nothing else (no S3: the container downloads the checkpoint from Hugging Face). The role is tagged
as sagemeter's, so `role delete` removes only a role sagemeter made.

IAM is eventually consistent: a new role may be unknown to a read for a few seconds, and unknown
to SageMaker for a little longer. `create_role` returns once IAM itself answers with the role and
its policy; `deploy` then resends a CreateModel that SageMaker refuses with "Could not assume
role" until it can (see `deploy.ROLE_PROPAGATION_S`): CreateModel creates nothing when refused.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError
from pydantic import BaseModel

from sagemeter.errors import PlatformError, UserError
from sagemeter.sagemaker.aws import Aws, aws_errors, error_code
from sagemeter.sagemaker.image import DLC_ACCOUNTS, REPOSITORY
from sagemeter.sagemaker.spec import OWNER_KEY, OWNER_VALUE

POLICY_NAME = "sagemeter-endpoint"
DEFAULT_WAIT_S = 120.0
LOG_GROUPS = "/aws/sagemaker/Endpoints/*"
METRICS_NAMESPACE = "/aws/sagemaker/Endpoints"

TRUST_POLICY: dict[str, Any] = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": "sagemaker.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
    ],
}


def permissions_policy() -> dict[str, Any]:
    """The role's one inline policy: image pull, container log, container metrics."""
    accounts = sorted({a for r, a in DLC_ACCOUNTS.items() if not r.startswith("cn-")})
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "EcrLogin",
                "Effect": "Allow",
                "Action": "ecr:GetAuthorizationToken",
                "Resource": "*",
            },
            {
                "Sid": "PullTheVllmImage",
                "Effect": "Allow",
                "Action": [
                    "ecr:BatchCheckLayerAvailability",
                    "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer",
                ],
                "Resource": [
                    f"arn:aws:ecr:*:{account}:repository/{REPOSITORY}" for account in accounts
                ],
            },
            {
                "Sid": "ContainerLog",
                "Effect": "Allow",
                "Action": [
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:DescribeLogStreams",
                    "logs:PutLogEvents",
                ],
                "Resource": f"arn:aws:logs:*:*:log-group:{LOG_GROUPS}",
            },
            {
                "Sid": "ContainerMetrics",
                "Effect": "Allow",
                "Action": "cloudwatch:PutMetricData",
                "Resource": "*",
                "Condition": {"StringEquals": {"cloudwatch:namespace": METRICS_NAMESPACE}},
            },
        ],
    }


class RoleResult(BaseModel):
    name: str
    arn: str
    created: bool  # False: sagemeter's role of that name existed; its policy was rewritten
    policy_name: str = POLICY_NAME
    visible_after_s: float


class RoleDeleted(BaseModel):
    name: str
    steps: list[str]


def _is_ours(role: dict[str, Any]) -> bool:
    return any(
        t.get("Key") == OWNER_KEY and t.get("Value") == OWNER_VALUE for t in role.get("Tags") or []
    )


def _get_role(aws: Aws, name: str) -> dict[str, Any] | None:
    try:
        return dict(aws.iam().get_role(RoleName=name)["Role"])
    except ClientError as exc:
        if error_code(exc) == "NoSuchEntity":
            return None
        raise


def create_role(
    name: str,
    *,
    wait_s: float = DEFAULT_WAIT_S,
    poll_s: float = 2.0,
    on_wait: Callable[[float], None] | None = None,
    aws: Aws | None = None,
) -> RoleResult:
    """Create (or refresh) the role and wait until IAM answers with it and its policy.

    A role of that name that sagemeter did not make is refused, never changed.
    """
    aws = aws or Aws()
    aws.require_credentials()
    iam = aws.iam()
    began = time.monotonic()
    with aws_errors(f"create the IAM role {name}", None, "iam"):
        try:
            arn = str(
                iam.create_role(
                    RoleName=name,
                    AssumeRolePolicyDocument=json.dumps(TRUST_POLICY),
                    Description="SageMaker endpoints made by sagemeter: image pull, logs, metrics",
                    Tags=[{"Key": OWNER_KEY, "Value": OWNER_VALUE}],
                )["Role"]["Arn"]
            )
            created = True
        except ClientError as exc:
            if error_code(exc) != "EntityAlreadyExists":
                raise
            existing = _get_role(aws, name)
            if existing is None or not _is_ours(existing):
                raise UserError(
                    f"an IAM role named {name} already exists and sagemeter did not make it: "
                    "pass its ARN with --role (or SAGEMETER_ROLE_ARN), or choose another name"
                ) from None
            arn, created = str(existing["Arn"]), False
        iam.put_role_policy(
            RoleName=name,
            PolicyName=POLICY_NAME,
            PolicyDocument=json.dumps(permissions_policy()),
        )
        _wait_visible(aws, name, began, wait_s, poll_s, on_wait)
    return RoleResult(
        name=name,
        arn=arn,
        created=created,
        visible_after_s=round(time.monotonic() - began, 1),
    )


def _wait_visible(
    aws: Aws,
    name: str,
    began: float,
    wait_s: float,
    poll_s: float,
    on_wait: Callable[[float], None] | None,
) -> None:
    """Poll GetRole and GetRolePolicy until both answer (IAM's reads lag its writes)."""
    while True:
        try:
            role = _get_role(aws, name)
            if role is not None:
                aws.iam().get_role_policy(RoleName=name, PolicyName=POLICY_NAME)
                return
        except ClientError as exc:
            if error_code(exc) != "NoSuchEntity":
                raise
        elapsed = time.monotonic() - began
        if elapsed >= wait_s:
            raise PlatformError(
                f"IAM still does not show role {name} and its policy {wait_s:.0f} s after "
                f"creating them: run `sagemeter sagemaker role create {name}` again in a minute"
            )
        if on_wait:
            on_wait(elapsed)
        time.sleep(poll_s)


def delete_role(name: str, *, aws: Aws | None = None) -> RoleDeleted:
    """Delete the role's inline policy and the role, only when it is tagged as sagemeter's."""
    aws = aws or Aws()
    aws.require_credentials()
    iam = aws.iam()
    steps: list[str] = []
    with aws_errors(f"delete the IAM role {name}", None, "iam"):
        role = _get_role(aws, name)
        if role is None:
            raise UserError(f"no IAM role named {name}")
        if not _is_ours(role):
            raise UserError(f"IAM role {name} is not tagged as sagemeter's: not touching it")
        for policy in iam.list_role_policies(RoleName=name).get("PolicyNames", []):
            iam.delete_role_policy(RoleName=name, PolicyName=policy)
            steps.append(f"policy {policy}: deleted")
        iam.delete_role(RoleName=name)
        steps.append(f"role {name}: deleted")
    return RoleDeleted(name=name, steps=steps)
