"""The decode `sagemeter sagemaker recommend` predicted for one instance type, carried from the
plan's SageMaker arm into that arm's result, and how the measured decode compares with it.

Recorded at plan time (when the checkpoint's header is read anyway), so `measure` makes no
extra network call for it. A prediction is for one instance type: when SageMaker placed another
(a fallback type), nothing is compared.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, model_validator

if TYPE_CHECKING:
    from sagemeter.results.model import MeasureResult


class PredictedDecode(BaseModel):
    """One instance type's predicted decode at one request (inspect's model)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    instance_type: str = Field(min_length=1, description="the type the prediction is for")
    ceiling_tokens_per_second: float = Field(
        gt=0, description="all GPUs' bandwidth / the bytes a token reads: an upper bound"
    )
    likely_tokens_per_second: list[float] | None = Field(
        None,
        description="the ceiling × the lowest and highest share known measurements reached",
    )
    decode_bytes_per_token: int | None = Field(None, gt=0)
    source: str = "sagemeter sagemaker recommend"

    @model_validator(mode="after")
    def _range(self) -> PredictedDecode:
        likely = self.likely_tokens_per_second
        if likely is not None and (len(likely) != 2 or not 0 < likely[0] <= likely[1]):
            raise ValueError("likely_tokens_per_second must be [low, high] with 0 < low <= high")
        return self


class PredictedBeside(BaseModel):
    """Measured decode beside the prediction, for one result."""

    instance_type: str
    placed_instance_type: str | None
    ceiling_tokens_per_second: float
    likely_tokens_per_second: list[float] | None
    measured_tokens_per_second: float | None
    measured_over_ceiling: float | None = Field(None, description="None: not compared")
    within_likely: bool | None = None
    note: str | None = Field(None, description="why there is no ratio")


def beside(
    predicted: PredictedDecode, placed: str | None, measured: float | None
) -> PredictedBeside:
    """The ratio measured / ceiling, only when the prediction's type is the one placed and decode
    was measured; otherwise None and why."""
    note = None
    if placed is None:
        note = "the placed instance type is not recorded"
    elif placed != predicted.instance_type:
        note = f"predicted for {predicted.instance_type}, placed on {placed}: not compared"
    elif measured is None:
        note = "decode was not measured"
    same = note is None and measured is not None
    likely = predicted.likely_tokens_per_second
    return PredictedBeside(
        instance_type=predicted.instance_type,
        placed_instance_type=placed,
        ceiling_tokens_per_second=predicted.ceiling_tokens_per_second,
        likely_tokens_per_second=likely,
        measured_tokens_per_second=measured,
        measured_over_ceiling=(
            measured / predicted.ceiling_tokens_per_second
            if same and measured is not None
            else None
        ),
        within_likely=(
            likely[0] <= measured <= likely[1]
            if same and likely is not None and measured is not None
            else None
        ),
        note=note,
    )


def placed_type(result: MeasureResult) -> str | None:
    """The one instance type SageMaker placed, as the result recorded it; None when it is not
    recorded or several were placed."""
    assert result.detail is not None
    placed = result.detail.environment.server.get("instance_types")
    if isinstance(placed, list) and len(placed) == 1 and isinstance(placed[0], str):
        return placed[0]
    return None


def compared(result: MeasureResult) -> PredictedBeside | None:
    """The result's measured decode beside its prediction; None without a prediction."""
    if result.detail is None or result.detail.environment.predicted_decode is None:
        return None
    predicted = result.detail.environment.predicted_decode
    return beside(predicted, placed_type(result), result.decode_tokens_per_second)
