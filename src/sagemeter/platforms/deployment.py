"""The journal's record of one endpoint a run deployed, on any platform, and the UTC stamps it
keeps. It sits with the platforms, below the experiment, because a platform writes it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

DeploymentState = Literal["deploying", "live", "deleting", "deleted", "failed"]


def utc_now() -> str:
    """Now, as the journal writes a time: UTC to the millisecond, ending in Z."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_utc(text: str) -> datetime:
    """A time the journal wrote, back as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class Deployment(BaseModel):
    """One endpoint the run created for one visit of an arm, on its platform, and what it costs.

    The fields here are every platform's; `record` is the platform's own (SageMaker's: the
    endpoint's name, the regions it may use and the one it was placed in, the instance types).
    A journal written before platforms were plug-ins held SageMaker's fields here: it reads as
    a SageMaker deployment (`_from_before_platforms`)."""

    result: str = Field(description="the visit (result name) it was deployed for")
    arm: str
    platform: str = Field(description="the platform it is deployed on: the arm's table name")
    target: str = Field(description="where it runs, as its platform names it")
    instance_type: str | None = Field(None, description="what it runs on (asked, then placed)")
    count: int = 1
    hourly_usd: float | None = Field(None, description="per instance of the type placed")
    price_note: str | None = None
    state: DeploymentState = "deploying"
    started_utc: str = Field(default_factory=utc_now, description="deploy began (cost from here)")
    live_utc: str | None = None
    deleted_utc: str | None = None
    attempts: list[str] = Field(default_factory=list, description="earlier places and why")
    note: str | None = None
    record: dict[str, Any] = Field(default_factory=dict, description="the platform's own")

    @model_validator(mode="before")
    @classmethod
    def _from_before_platforms(cls, data: Any) -> Any:
        """A deployment as journals wrote it before platforms were plug-ins: SageMaker's."""
        if not isinstance(data, dict) or "platform" in data or "endpoint" not in data:
            return data
        own = ("endpoint", "regions", "region", "instance_types", "placed_instance_type")
        record = {key: data[key] for key in own if key in data}
        rest = {key: value for key, value in data.items() if key not in own}
        regions = record.get("regions") or [None]
        types = record.get("instance_types") or [None]
        return {
            **rest,
            "platform": "sagemaker",
            "target": f"{record['endpoint']}@{record.get('region') or regions[0]}",
            "instance_type": record.get("placed_instance_type") or types[0],
            "record": record,
        }

    @property
    def may_exist(self) -> bool:
        return self.state in ("deploying", "live", "deleting", "failed")

    def cost_usd(self, now: datetime | None = None) -> float | None:
        """Price × instances × hours from the start of the deploy to its deletion (or now)."""
        if self.hourly_usd is None:
            return None
        end = parse_utc(self.deleted_utc) if self.deleted_utc else (now or datetime.now(UTC))
        hours = max((end - parse_utc(self.started_utc)).total_seconds(), 0.0) / 3600.0
        return self.hourly_usd * self.count * hours
