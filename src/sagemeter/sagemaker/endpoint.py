"""Reading one endpoint's state and waiting for it to change, with a progress callback.

The callback gets a `Progress` after every poll (status, elapsed time, the newest log line once
the log group exists), so a face can draw a live line; the library itself never prints.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError
from pydantic import BaseModel

from sagemeter.sagemaker.aws import Aws, aws_errors, is_not_found
from sagemeter.sagemaker.logs import newest_log_line

# SageMaker refuses DeleteEndpoint in these states; a delete waits until the endpoint leaves them.
BUSY_STATES = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack"})
FINAL_STATES = frozenset({"InService", "Failed", "OutOfService", "UpdateRollbackFailed"})
DEFAULT_POLL_S = 15.0


class Progress(BaseModel):
    """One observation during a long operation."""

    name: str
    region: str
    phase: str
    status: str | None
    elapsed_s: float
    log_line: str | None = None


ProgressCallback = Callable[[Progress], None]


def describe_endpoint(aws: Aws, name: str, region: str) -> dict[str, Any] | None:
    """DescribeEndpoint's answer, or None when there is no endpoint of that name."""
    with aws_errors(f"describe endpoint {name}", region):
        try:
            return dict(aws.sagemaker(region).describe_endpoint(EndpointName=name))
        except ClientError as exc:
            if is_not_found(exc):
                return None
            raise


def wait_until(
    aws: Aws,
    name: str,
    region: str,
    *,
    done: Callable[[dict[str, Any] | None], bool],
    phase: str,
    deadline_s: float | None,
    poll_s: float = DEFAULT_POLL_S,
    on_progress: ProgressCallback | None = None,
    with_logs: bool = True,
    on_status: Callable[[str | None], None] | None = None,
) -> tuple[dict[str, Any] | None, bool]:
    """Poll DescribeEndpoint until `done(description)`; returns (description, reached).

    `reached` is False when the deadline passed first. `on_status` hears each new status (the
    deploy uses it to keep the ledger's status current).
    """
    began = time.monotonic()
    last_status: str | None = "?"
    while True:
        description = describe_endpoint(aws, name, region)
        status = description.get("EndpointStatus") if description else None
        if status != last_status and on_status:
            on_status(status)
        last_status = status
        if done(description):
            return description, True
        elapsed = time.monotonic() - began
        if on_progress:
            line = (
                newest_log_line(name, region, aws, since=description.get("CreationTime"))
                if with_logs and description
                else None
            )
            on_progress(
                Progress(
                    name=name,
                    region=region,
                    phase=phase,
                    status=status,
                    elapsed_s=elapsed,
                    log_line=line,
                )
            )
        if deadline_s is not None and elapsed >= deadline_s:
            return description, False
        time.sleep(poll_s)


def placed_instance_types(description: dict[str, Any]) -> list[str]:
    """The types SageMaker placed instances of, from DescribeEndpoint's InstancePools summary
    (empty for a variant of one InstanceType: its summary does not repeat the type)."""
    running: list[str] = []
    for variant in description.get("ProductionVariants", []) or []:
        for pool in variant.get("InstancePools", []) or []:
            if pool.get("CurrentInstanceCount") and pool.get("InstanceType"):
                running.append(str(pool["InstanceType"]))
    return running


def deployed_image(description: dict[str, Any]) -> str | None:
    """What runs, by content: the first variant's ResolvedImage (`repository@sha256:…`)."""
    for variant in description.get("ProductionVariants", []) or []:
        for image in variant.get("DeployedImages", []) or []:
            if image.get("ResolvedImage"):
                return str(image["ResolvedImage"])
    return None


def instance_types_of(description: dict[str, Any], config: dict[str, Any] | None) -> list[str]:
    """The instance types an endpoint runs: the pools' current types, else the config's."""
    running = placed_instance_types(description)
    if running:
        return running
    configured: list[str] = []
    for variant in (config or {}).get("ProductionVariants", []) or []:
        if variant.get("InstanceType"):
            configured.append(str(variant["InstanceType"]))
        else:
            pools = sorted(
                variant.get("InstancePools", []) or [], key=lambda p: p.get("Priority", 9)
            )
            configured.extend(str(p["InstanceType"]) for p in pools if p.get("InstanceType"))
    return configured


def instance_count_of(description: dict[str, Any], config: dict[str, Any] | None) -> int:
    current = sum(
        int(v.get("CurrentInstanceCount") or 0)
        for v in description.get("ProductionVariants", []) or []
    )
    if current:
        return current
    return sum(
        int(v.get("InitialInstanceCount") or 0)
        for v in (config or {}).get("ProductionVariants", []) or []
    )
