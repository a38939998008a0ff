"""`[arm.sagemaker]`: the plan table of an arm the run deploys on SageMaker, as users write it.

Its deploy settings are `sagemaker deploy`'s, declared once in `deploy_fields.DeployFields` (type,
bounds, default, help; `role` is the command line's `--role`); the plan's own are the endpoint's
name (default PLAN-ARM), the container environment as a table, the fallbacks as lists, and the
prediction `sagemaker recommend --plan` writes. A plan writes 0 for vLLM's own `max_model_len`
and `gpu_memory_utilization`, as the command line does (TOML has no null), and it is written
back as 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, SerializerFunctionWrapHandler, field_validator, model_serializer
from pydantic_core import PydanticKnownError

from sagemeter.results.predicted_decode import PredictedDecode
from sagemeter.sagemaker.deploy_fields import VLLMS_OWN, DeployFields


class SageMakerArm(DeployFields):
    """`[arm.sagemaker]`: an endpoint the run deploys, measures and deletes (`deploy`'s options)."""

    fallback_regions: list[str] = Field(default_factory=list)
    fallback_instance_types: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    endpoint: str | None = Field(None, description="endpoint name; default PLAN-ARM")
    predicted_decode: PredictedDecode | None = Field(
        None,
        description="what `sagemaker recommend --plan` predicted for instance_type; the run "
        "copies it into the arm's result, and the report puts it beside the measured decode",
    )

    @field_validator(*VLLMS_OWN, mode="before")
    @classmethod
    def _zero_is_vllms_own(cls, value: Any) -> Any:
        """0: leave it to vLLM (None), as `--max-model-len 0` does; below 0 is refused as the
        plan's own lowest value, 0 (what a plan was always told)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return value
        if value < 0:
            raise PydanticKnownError("greater_than_equal", {"ge": 0})
        return None if value == 0 else value

    @model_serializer(mode="wrap")
    def _vllms_own_is_zero(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Written back as the plan wrote it: 0 (0.0 for the share, a float)."""
        data = handler(self)
        for key, zero in zip(VLLMS_OWN, (0, 0.0), strict=True):
            if isinstance(data, dict) and key in data and data[key] is None:
                data[key] = zero
        return data

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
