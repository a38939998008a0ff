"""Deploy's settings, each declared once: its type, bounds, default and help.

Two faces hold them: `sagemeter sagemaker deploy`'s options (the command line and the MCP tool,
`sagemeter.options.sagemaker.DeployOptions`, which takes each field from here with `taken`) and a
plan's `[arm.sagemaker]` table (`plan_table.SageMakerArm`, which is these fields and the plan's
own). They live here, below both, because the plan table is SageMaker's platform's (the platform
reads it, and `sagemeter.sagemaker` may not import the options above it). The bounds are
`spec.py`'s, which the create requests hold too.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from sagemeter.limits import DeadlineMinutes
from sagemeter.sagemaker.spec import (
    CONTAINER_TIMEOUT,
    DEFAULT_DOWNLOAD_TIMEOUT_S,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_INSTANCE_TYPE,
    DEFAULT_MAX_MODEL_LEN,
    DEFAULT_STARTUP_TIMEOUT_S,
    GPU_SHARE,
    INSTANCES,
    MODEL_ID,
    MODEL_LEN,
    PROVISION_TIMEOUT,
)

DEFAULT_DEADLINE_MINUTES = 60.0
# None on purpose (vLLM's own) is written 0 by the faces that have no null: the command line, and
# a plan (TOML has none).
VLLMS_OWN = ("max_model_len", "gpu_memory_utilization")


class DeployFields(BaseModel):
    """What is deployed, with what, and how long deploy waits for it (the endpoint's name, the
    container environment and the fallbacks each face spells its own way, so they are not here).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    model: Annotated[str, MODEL_ID, Field(description="Hugging Face model id")]
    instance_type: Annotated[str, Field(description="SageMaker instance type")] = (
        DEFAULT_INSTANCE_TYPE
    )
    region: Annotated[str | None, Field(description="AWS region such as us-east-2")] = None
    role_arn: Annotated[
        str | None,
        Field(alias="role", description="execution role ARN (default: $SAGEMETER_ROLE_ARN)"),
    ] = None
    image: Annotated[
        str | None, Field(description="full image URI (default: the AWS vLLM container)")
    ] = None
    image_tag: Annotated[
        str | None,
        Field(description="pin a tag of the AWS vLLM container (default: the newest pinned one)"),
    ] = None
    max_model_len: Annotated[
        int | None, MODEL_LEN, Field(description="SM_VLLM_MAX_MODEL_LEN, tokens")
    ] = DEFAULT_MAX_MODEL_LEN
    gpu_memory_utilization: Annotated[
        float | None, GPU_SHARE, Field(description="SM_VLLM_GPU_MEMORY_UTILIZATION")
    ] = DEFAULT_GPU_MEMORY_UTILIZATION
    count: Annotated[int, INSTANCES, Field(description="instances")] = 1
    inference_ami: Annotated[
        str | None, Field(description="InferenceAmiVersion (default: by CUDA)")
    ] = None
    startup_timeout: Annotated[
        int, CONTAINER_TIMEOUT, Field(description="container health-check timeout, s")
    ] = DEFAULT_STARTUP_TIMEOUT_S
    download_timeout: Annotated[
        int, CONTAINER_TIMEOUT, Field(description="model data download timeout, s")
    ] = DEFAULT_DOWNLOAD_TIMEOUT_S
    provision_timeout: Annotated[
        int | None,
        PROVISION_TIMEOUT,
        Field(description="VariantInstanceProvisionTimeoutInSeconds"),
    ] = None
    deadline_minutes: Annotated[
        DeadlineMinutes, Field(description="stop waiting for InService after this long")
    ] = DEFAULT_DEADLINE_MINUTES
