"""The local record of every cloud resource sagemeter creates, kept in the user's state dir.

One JSON file per endpoint name and region, rewritten atomically at every step. Before each create
call the resource is written as `requested`; when the call returns it becomes `created` (or
`absent` when AWS refused it). So an interrupt at any moment leaves a line that `sagemeter
sagemaker list` shows.
Fully deleted deployments move to `history/`, so a name can be deployed again (A-B-A).
"""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from sagemeter.atomic import write_text_atomic
from sagemeter.paths import state_dir

SCHEMA_VERSION = 1
ResourceKind = Literal["model", "endpoint-config", "endpoint"]
# requested: the create call was sent (or about to be); whether it exists is unknown.
# created: AWS returned its ARN.  absent: the create call failed, nothing exists.
# deleted: sagemeter deleted it (or found it gone).
ResourceState = Literal["requested", "created", "absent", "deleted"]
DELETE_ORDER: tuple[ResourceKind, ...] = ("endpoint", "endpoint-config", "model")


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class LedgerResource(BaseModel):
    kind: ResourceKind
    name: str
    arn: str | None = None
    state: ResourceState
    updated_utc: str = Field(default_factory=utc_now)

    @property
    def may_exist(self) -> bool:
        return self.state in ("requested", "created")


class LedgerRecord(BaseModel):
    """One deployment of one endpoint name in one region."""

    schema_version: int = SCHEMA_VERSION
    name: str
    region: str
    model_id: str
    instance_types: list[str]
    count: int
    image: str
    image_source: str | None = Field(None, description="registry, fallback, --image-tag, --image")
    image_digest: str | None = Field(
        None, description="repository@sha256:… of what runs (SageMaker's ResolvedImage)"
    )
    spec: dict[str, object] = Field(description="the deploy spec, secrets masked")
    created_utc: str = Field(default_factory=utc_now)
    resources: list[LedgerResource] = Field(default_factory=list)
    endpoint_status: str | None = None
    failure_reason: str | None = None
    in_service_utc: str | None = None
    create_to_inservice_minutes: float | None = None
    placed_instance_types: list[str] = Field(
        default_factory=list, description="the types SageMaker placed (of InstancePools)"
    )
    hourly_usd: float | None = Field(None, description="on-demand price per instance-hour")
    priced_instance_type: str | None = Field(None, description="the type hourly_usd is for")
    price_note: str | None = Field(None, description="the price's source, or why there is none")
    deleted_utc: str | None = None
    note: str | None = None

    @property
    def active(self) -> bool:
        """True while any of its resources may still exist in AWS."""
        return any(resource.may_exist for resource in self.resources)

    def resource(self, kind: ResourceKind) -> LedgerResource | None:
        for resource in reversed(self.resources):
            if resource.kind == kind:
                return resource
        return None

    def mark(
        self, kind: ResourceKind, name: str, state: ResourceState, arn: str | None = None
    ) -> None:
        """Set the state of resource (kind, name), adding it the first time it is named."""
        for resource in self.resources:
            if resource.kind == kind and resource.name == name:
                resource.state = state
                resource.arn = arn or resource.arn
                resource.updated_utc = utc_now()
                return
        self.resources.append(LedgerResource(kind=kind, name=name, arn=arn, state=state))

    def leftovers(self) -> list[LedgerResource]:
        """Resources that may still exist, in the order they must be deleted."""
        return sorted(
            (r for r in self.resources if r.may_exist), key=lambda r: DELETE_ORDER.index(r.kind)
        )


class Ledger:
    """The records in `<state dir>/sagemaker/`; every write is atomic."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or state_dir() / "sagemaker"

    def path(self, region: str, name: str) -> Path:
        return self.root / "endpoints" / region / f"{name}.json"

    def get(self, region: str, name: str) -> LedgerRecord | None:
        return self._read(self.path(region, name))

    def save(self, record: LedgerRecord) -> None:
        text = record.model_dump_json(indent=2, exclude_none=True)
        write_text_atomic(self.path(record.region, record.name), text + "\n")

    def records(self) -> list[LedgerRecord]:
        """Every current record (active or not yet archived), oldest first."""
        found = []
        for path in sorted((self.root / "endpoints").glob("*/*.json")):
            record = self._read(path)
            if record is not None:
                found.append(record)
        return sorted(found, key=lambda r: r.created_utc)

    def active(self) -> list[LedgerRecord]:
        return [record for record in self.records() if record.active]

    def regions(self) -> list[str]:
        return sorted({record.region for record in self.records()})

    def archive(self, record: LedgerRecord) -> Path:
        """Move a finished record to history/, freeing its name for the next deploy."""
        record.deleted_utc = record.deleted_utc or utc_now()
        stamp = record.created_utc.replace(":", "").replace("-", "")
        target = self.root / "history" / record.region / f"{record.name}-{stamp}.json"
        write_text_atomic(target, record.model_dump_json(indent=2, exclude_none=True) + "\n")
        with contextlib.suppress(FileNotFoundError):
            self.path(record.region, record.name).unlink()
        return target

    def history(self) -> list[LedgerRecord]:
        """Every finished deployment, oldest first."""
        found = []
        for path in sorted((self.root / "history").glob("*/*.json")):
            record = self._read(path)
            if record is not None:
                found.append(record)
        return sorted(found, key=lambda r: r.created_utc)

    @staticmethod
    def _read(path: Path) -> LedgerRecord | None:
        try:
            return LedgerRecord.model_validate(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, ValidationError):
            # A damaged record must not hide the others; `list` reports it by name.
            return LedgerRecord(
                name=path.stem,
                region=path.parent.name,
                model_id="?",
                instance_types=[],
                count=0,
                image="?",
                spec={},
                note=f"unreadable record {path}",
                resources=[LedgerResource(kind="endpoint", name=path.stem, state="requested")],
            )
