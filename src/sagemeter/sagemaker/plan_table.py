"""`[arm.sagemaker]`: the plan table of an arm the run deploys on SageMaker, as users write it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sagemeter.limits import MAX_CONTEXT_TOKENS, DeadlineMinutes
from sagemeter.results.predicted_decode import PredictedDecode
from sagemeter.sagemaker.spec import (
    DEFAULT_DOWNLOAD_TIMEOUT_S,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_INSTANCE_TYPE,
    DEFAULT_MAX_MODEL_LEN,
    DEFAULT_STARTUP_TIMEOUT_S,
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class SageMakerArm(_Strict):
    """`[arm.sagemaker]`: an endpoint the run deploys, measures and deletes (`deploy`'s options)."""

    model: str = Field(min_length=1, description="Hugging Face model id")
    instance_type: str = DEFAULT_INSTANCE_TYPE
    region: str | None = Field(None, description="default: AWS_REGION, AWS_DEFAULT_REGION, profile")
    fallback_regions: list[str] = Field(default_factory=list)
    fallback_instance_types: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    endpoint: str | None = Field(None, description="endpoint name; default PLAN-ARM")
    role: str | None = Field(None, description="execution role ARN; default $SAGEMETER_ROLE_ARN")
    image: str | None = None
    image_tag: str | None = None
    max_model_len: int = Field(
        DEFAULT_MAX_MODEL_LEN, ge=0, le=MAX_CONTEXT_TOKENS, description="0 leaves it to vLLM"
    )
    gpu_memory_utilization: float = Field(DEFAULT_GPU_MEMORY_UTILIZATION, ge=0, le=1)
    count: int = Field(1, ge=1, le=100)
    inference_ami: str | None = None
    startup_timeout: int = DEFAULT_STARTUP_TIMEOUT_S
    download_timeout: int = DEFAULT_DOWNLOAD_TIMEOUT_S
    provision_timeout: int | None = None
    deadline_minutes: DeadlineMinutes = Field(60.0, description="stop waiting for InService after")
    predicted_decode: PredictedDecode | None = Field(
        None,
        description="what `sagemaker recommend --plan` predicted for instance_type; the run "
        "copies it into the arm's result, and the report puts it beside the measured decode",
    )

    @field_validator("env", mode="before")
    @classmethod
    def _env_strings(cls, value: Any) -> Any:
        """TOML writes 8192 as a number; the container environment holds strings."""
        if isinstance(value, Mapping):
            return {
                key: str(item).lower() if isinstance(item, bool) else str(item)
                for key, item in value.items()
            }
        return value

    @property
    def instance_types(self) -> list[str]:
        return [self.instance_type, *self.fallback_instance_types]
