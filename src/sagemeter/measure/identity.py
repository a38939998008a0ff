"""The server's identity between phases: a server swapped or restarted mid-measure is seen.

The one place the rule lives, for every face (`measure`'s phases, `load`'s runs, sweep levels
and search probes, an experiment's arms and the MCP tools, all of which run through these).

The identity is what `/v1/models` says: the first model's id and a digest of the whole answer
(each entry's `created` and vLLM's `permission` left out: vLLM and llama.cpp stamp `created` with
the time of the call, and vLLM gives every answer's permission a new random id); for a server
sagemeter started, its process (the pid, and whether it still runs); and where the server has a
Prometheus `/metrics`, its process start time (`process_start_time_seconds`). A restart of the
same model is seen there too: the start time moves, or a counter (`*_total`) goes back below
what the previous reading saw. It is read before the first phase, again at every phase boundary
and at the end: one cheap GET of each page. A change ends the measurement's trust in what
follows: the phases after it are not measured, and the result says why (before → after).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from sagemeter import signal_wakeup
from sagemeter.errors import UserError
from sagemeter.measure.server_metrics.scrape import Snapshot, scrape
from sagemeter.results.server_identity import ServerIdentity
from sagemeter.transport.aws_session import new_session
from sagemeter.transport.client import HttpClient, TransportError
from sagemeter.transport.models_list import first_model
from sagemeter.transport.retry import RetryPolicy

RETRY = RetryPolicy(retries=2, base_s=0.25, max_s=2.0)
START_TIME = "process_start_time_seconds"  # prometheus_client's process collector (vLLM has it)
START_TOLERANCE_S = 0.005  # the same process reads the same start again (kernel ticks + boot time)


@dataclass(frozen=True)
class Identity:
    """One reading of `/v1/models` (the first model's id, the answer's digest), the process
    sagemeter started (if any) and the start time `/metrics` gives (if any)."""

    model: str | None
    models_sha256: str
    process: str | None = None
    started: float | None = None
    # What `started` is, in a reason: `/metrics` gives a process start, SageMaker an endpoint's
    # creation (an endpoint deleted and created again under its name is another server).
    started_name: str = "process start time"
    started_source: str = f"/metrics {START_TIME}"


@dataclass(frozen=True)
class Reading:
    """One reading: the identity, and `/metrics`' counters (`*_total`) to see a restart by."""

    identity: Identity | None
    counters: dict[str, float]
    busy: str | None = None  # why a server still there gave no reading (a timeout, a 429/503)


BUSY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})  # a server there but busy

VOLATILE_KEYS = frozenset({"created", "permission"})  # new in every answer of the same server


def _steady(value: Any) -> Any:
    """`value` without the keys that change from one answer to the next, at any depth."""
    if isinstance(value, dict):
        return {k: _steady(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [_steady(item) for item in value]
    return value


def identity_of(payload: Any) -> Identity | None:
    """The identity a `/v1/models` answer gives, or None when it is not a model list."""
    models = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(models, list):
        return None
    steady = [_steady(entry) for entry in models]
    digest = hashlib.sha256(json.dumps(steady, sort_keys=True).encode()).hexdigest()

    first = first_model(payload)
    return Identity(model=None if first is None else str(first["id"]), models_sha256=digest)


def counters_of(snapshot: Snapshot) -> dict[str, float]:
    """The counters of a `/metrics` page (Prometheus names them `*_total`): they only grow
    while one process runs, so one that went down is a new process."""
    return {name: value for name, value in snapshot.samples.items() if name.endswith("_total")}


def _utc(seconds: float) -> str:
    stamp = datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def change_reason(before: Identity, after: Identity | None, between: str) -> str | None:
    """Why `after` is another server than `before` (None: the same); `between` names where."""
    if after is None:
        return f"the server's model list could not be read again {between}"
    if after.model != before.model:
        return f"the server's model changed from {before.model} to {after.model} {between}"
    if after.models_sha256 != before.models_sha256:
        return f"the server's model list changed {between} (model {before.model})"
    if after.process != before.process:
        return f"the server's process changed from {before.process} to {after.process} {between}"
    if (
        before.started is not None
        and after.started is not None
        and abs(after.started - before.started) > START_TOLERANCE_S
    ):
        return (
            f"the server restarted: its {before.started_name} moved from {_utc(before.started)} "
            f"to {_utc(after.started)} {between} ({before.started_source})"
        )
    return None


def restart_reason(before: dict[str, float], after: dict[str, float], between: str) -> str | None:
    """Why two readings of `/metrics`' counters are of two processes (None: one), or None when
    either reading had none: a counter that went back is a restart (or another replica)."""
    for name, value in sorted(after.items()):
        earlier = before.get(name)
        if earlier is not None and value < earlier:
            return (
                f"the server restarted: its /metrics counter {name} went back from {earlier:g} "
                f"to {value:g} {between}"
            )
    return None


class IdentityWatch:
    """Reads the identity at the start, checks it at each boundary; remembers the first change.

    A server without `/v1/models` (SageMaker, a proxy that hides it) is not watched: its
    identity is unknown from the start, and nothing is claimed about it. Each reading opens its
    own connections, so the watch serves an event loop (`open`, `check`) and blocking code
    (`open_blocking`, `check_blocking`: `load`'s runs, the SLO search's probes) alike.
    """

    def __init__(
        self,
        root: str | None,
        api_key: str | None = None,
        process: Callable[[], str | None] = lambda: None,
        reader: Callable[[], Reading] | None = None,
    ) -> None:
        self.root = root
        self.reader = reader  # a blocking reading of a server without /v1/models (SageMaker)
        self.api_key = api_key
        self.process = process
        self.first: Identity | None = None
        self.counters: dict[str, float] = {}  # as last read
        self.checked: list[str] = []
        self.changed: str | None = None

    async def _read(self) -> Reading:
        if self.reader is not None:
            return await asyncio.to_thread(self.reader)
        assert self.root is not None
        http = HttpClient(self.root, api_key=self.api_key)
        try:
            try:
                # A transient failure of this one GET is sent again: it is no change of model.
                reply = await http.call_json("GET", "/v1/models", timeout_s=10.0, retry=RETRY)
            except TransportError as exc:
                if str(exc).startswith("timeout"):  # there, but busy: no sign of another server
                    return Reading(None, {}, busy="/v1/models gave no answer within 10 s")
                return Reading(None, {})  # refused or reset: the server is gone
            if reply.status in BUSY_STATUSES:
                return Reading(None, {}, busy=f"/v1/models answered HTTP {reply.status}")
            found = identity_of(reply.payload) if reply.status == 200 else None
            if found is None:
                return Reading(None, {})
            try:
                snapshot: Snapshot | None = await scrape(http)
            except UserError:  # no /metrics (or not Prometheus text): no start-up facts
                snapshot = None
        finally:
            await http.aclose()
        started = snapshot.samples.get(START_TIME) if snapshot is not None else None
        identity = replace(found, process=self.process(), started=started)
        return Reading(identity, counters_of(snapshot) if snapshot is not None else {})

    async def open(self) -> None:
        """The identity before the first phase."""
        if self.root is not None or self.reader is not None:
            reading = await self._read()
            self.first, self.counters = reading.identity, reading.counters

    async def check(self, before: str, after: str | None) -> str | None:
        """Read again after phase `before` (and before `after`, None: the end); the first change
        is kept and returned, and every later check returns it unread."""
        if after is None:
            return await self.check_at(before, f"after the {before} phase")
        return await self.check_at(f"{before}/{after}", f"between the {before} and {after} phases")

    async def check_at(self, label: str, between: str) -> str | None:
        """Read again at the boundary `label` (kept in `checked`), `between` saying where in the
        reason; the first change is kept and returned, every later check returns it unread."""
        if self.changed is not None or self.first is None:
            return self.changed
        reading = await self._read()
        if reading.identity is None and reading.busy is not None:
            # A busy server's timeout or 429/503 is no sign of another server: this boundary
            # is named unchecked, and the phases go on.
            self.checked.append(f"{label} (not read: {reading.busy})")
            return None
        self.checked.append(label)
        self.changed = change_reason(self.first, reading.identity, between)
        if self.changed is None:
            self.changed = restart_reason(self.counters, reading.counters, between)
        if reading.counters:
            self.counters = reading.counters
        return self.changed

    def open_blocking(self) -> None:
        """`open` from code without an event loop (a thread, the `load` command)."""
        signal_wakeup.run(self.open())

    @classmethod
    def opened(cls, target: str, api_key: str | None = None) -> IdentityWatch:
        """A watch of `target` (`http://HOST:PORT[/v1]`), its identity read before any run
        (`load`'s runs: loadgen/identity.py's `WatchedRuns`)."""
        watch = cls(target, api_key)
        watch.open_blocking()
        return watch

    def check_blocking(self, label: str, between: str) -> str | None:
        """`check_at` from code without an event loop."""
        if self.changed is not None or self.first is None:
            return self.changed
        return signal_wakeup.run(self.check_at(label, between))

    def record(self) -> ServerIdentity | None:
        """What the result keeps: the identity first read, the boundaries checked, any change."""
        if self.first is None:
            return None
        return ServerIdentity(
            model=self.first.model,
            models_sha256=self.first.models_sha256,
            process=self.first.process,
            process_start_time_s=self.first.started,
            checked=list(self.checked),
            changed=self.changed,
        )


def sagemaker_identity(name: str, region: str) -> Callable[[], Reading]:
    """A SageMaker endpoint's identity, read from the control plane (it has no /v1/models): its
    endpoint config, each variant's model and instance type, the images deployed, and its
    creation time (a redeploy to another config, or the endpoint deleted and created again, is
    another server). A failed read is no identity (the first) or a change (later)."""

    def read() -> Reading:
        from botocore.exceptions import BotoCoreError, ClientError

        # Here, not at the top: the SageMaker package costs every `load` and `measure` of an
        # HTTP server about 0.15 s to import (botocore's config and the package's modules).
        from sagemeter.sagemaker.aws import CONTROL_CONFIG

        try:
            client = new_session().client("sagemaker", region_name=region, config=CONTROL_CONFIG)
            endpoint = client.describe_endpoint(EndpointName=name)
            config = client.describe_endpoint_config(
                EndpointConfigName=endpoint["EndpointConfigName"]
            )
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if "Throttl" in code or code in ("ServiceUnavailable", "InternalFailure"):
                return Reading(None, {}, busy=f"DescribeEndpoint answered {code}")
            return Reading(None, {})
        except (BotoCoreError, KeyError):
            return Reading(None, {})
        variants = [
            {key: variant.get(key) for key in ("VariantName", "ModelName", "InstanceType")}
            for variant in config.get("ProductionVariants") or []
        ]
        images = sorted(
            str(image.get("ResolvedImage") or image.get("SpecifiedImage"))
            for variant in endpoint.get("ProductionVariants") or []
            for image in variant.get("DeployedImages") or []
        )
        steady = {"config": endpoint["EndpointConfigName"], "variants": variants, "images": images}
        digest = hashlib.sha256(json.dumps(steady, sort_keys=True).encode()).hexdigest()
        created = endpoint.get("CreationTime")
        identity = Identity(
            model=str(variants[0]["ModelName"]) if variants else None,
            models_sha256=digest,
            started=created.timestamp() if isinstance(created, datetime) else None,
            started_name="creation time",
            started_source="DescribeEndpoint CreationTime",
        )
        return Reading(identity, {})

    return read
