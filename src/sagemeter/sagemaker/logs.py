"""The endpoint's CloudWatch log: recent lines, following, the newest line, and start-up facts.

SageMaker writes each instance's container output to `/aws/sagemaker/Endpoints/NAME`, one stream
per instance (`AllTraffic/i-…`). The group appears only once a container has started, so a missing
group means "no logs yet", never an error. The group outlives the endpoint: a name deployed again
(A-B-A) appends new streams, so lines and start-up facts are read from the current endpoint's
lifetime. A stream belongs to the deployment it started in: its first event (or, before it has
one, its creation) is after that endpoint's CreationTime. `lastEventTimestamp` is no guide: AWS
updates it lazily (up to an hour late), so the previous container's stream can look newest.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel

from sagemeter.errors import UserError
from sagemeter.results import StartupFacts
from sagemeter.sagemaker.aws import Aws, aws_errors, error_code
from sagemeter.sagemaker.ledger import Ledger
from sagemeter.sagemaker.redact import redact
from sagemeter.startup_log import parse_vllm_log

# CloudWatch filter syntax: `?term` ORs terms; quoted terms match the phrase as written.
STARTUP_FILTER = (
    '?"Model loading took" ?"GPU KV cache size" ?"Maximum concurrency for" ?"quantization="'
)
UNFILTERED_SCAN_LIMIT = 20_000


def log_group(name: str) -> str:
    return f"/aws/sagemaker/Endpoints/{name}"


class LogLine(BaseModel):
    timestamp_ms: int
    stream: str
    message: str
    event_id: str | None = None


class LogsResult(BaseModel):
    name: str
    region: str
    group: str
    exists: bool
    lines: list[LogLine]
    note: str | None = None


def _missing(exc: ClientError) -> bool:
    return error_code(exc) == "ResourceNotFoundException"


def _line(event: dict[str, object], stream: str | None = None) -> LogLine:
    return LogLine(
        timestamp_ms=int(event.get("timestamp") or 0),  # type: ignore[call-overload]
        stream=str(stream or event.get("logStreamName") or ""),
        message=redact(str(event.get("message") or "").rstrip("\n")),
        event_id=str(event["eventId"]) if event.get("eventId") else None,
    )


def _started_ms(stream: dict[str, Any]) -> int:
    """When a stream started: its first event, or its creation while it has none."""
    return int(stream.get("firstEventTimestamp") or stream.get("creationTime") or 0)


def _all_streams(aws: Aws, name: str, region: str) -> list[dict[str, Any]] | None:
    """Every stream of the endpoint's group (paged); None when the group is missing."""
    streams: list[dict[str, Any]] = []
    try:
        paginator = aws.logs(region).get_paginator("describe_log_streams")
        for page in paginator.paginate(logGroupName=log_group(name)):
            streams.extend(dict(s) for s in page.get("logStreams", []) if "logStreamName" in s)
    except ClientError as exc:
        if _missing(exc):
            return None
        raise
    return streams


def current_streams(
    aws: Aws, name: str, region: str, since: datetime | None, count: int = 10
) -> list[str] | None:
    """The streams of the deployment created at `since`, newest first; None when the group is
    missing. Without `since`, the `count` streams that started last."""
    streams = _all_streams(aws, name, region)
    if streams is None:
        return None
    if since is not None:
        cutoff = int(since.timestamp() * 1000)
        streams = [s for s in streams if _started_ms(s) >= cutoff]
    streams.sort(key=_started_ms, reverse=True)
    return [str(s["logStreamName"]) for s in streams[:count]]


def deployment_start(name: str, region: str, aws: Aws) -> datetime | None:
    """When the endpoint's current (or, once deleted, its last recorded) deployment began."""
    created = _creation_time(aws, name, region)
    if created is not None:
        return created
    ledger = Ledger()
    records = [r for r in ledger.history() if r.name == name and r.region == region]
    record = ledger.get(region, name) or (records[-1] if records else None)
    if record is None:
        return None
    try:
        return datetime.strptime(record.created_utc, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def recent_logs(name: str, region: str, *, limit: int = 50, aws: Aws | None = None) -> LogsResult:
    """The last `limit` lines of the current deployment's streams, oldest first."""
    aws = aws or Aws()
    group = log_group(name)
    with aws_errors(f"read the log group {group}", region, "logs"):
        since = deployment_start(name, region, aws)
        streams = current_streams(aws, name, region, since)
        if streams is None:
            return LogsResult(name=name, region=region, group=group, exists=False, lines=[])
        lines: list[LogLine] = []
        for stream in streams:
            try:
                response = aws.logs(region).get_log_events(
                    logGroupName=group, logStreamName=stream, limit=limit, startFromHead=False
                )
            except ClientError as exc:
                if _missing(exc):
                    continue
                raise
            lines.extend(_line(dict(e), stream) for e in response.get("events", []))
    lines.sort(key=lambda line: line.timestamp_ms)
    note = None
    if not streams and since is not None:
        note = (
            f"no lines yet from the deployment created {since.astimezone(UTC):%Y-%m-%d %H:%M} "
            "UTC; older streams in the group belong to earlier deployments of this name"
        )
    return LogsResult(
        name=name, region=region, group=group, exists=True, lines=lines[-limit:], note=note
    )


def newest_log_line(
    name: str, region: str, aws: Aws, *, since: datetime | None = None
) -> str | None:
    """The newest line of the stream that started last after `since` (the endpoint's
    CreationTime), for a progress line; None before there is one."""
    try:
        streams = current_streams(aws, name, region, since, count=1)
        if not streams:
            return None
        response = aws.logs(region).get_log_events(
            logGroupName=log_group(name), logStreamName=streams[0], limit=1, startFromHead=False
        )
    except ClientError:
        return None  # the progress line is a courtesy; a missing permission must not stop a wait
    events = response.get("events", [])
    return _line(dict(events[-1]), streams[0]).message if events else None


def follow_logs(
    name: str,
    region: str,
    on_line: Callable[[LogLine], None],
    *,
    since_ms: int | None = None,
    poll_s: float = 2.0,
    should_stop: Callable[[], bool] = lambda: False,
    on_waiting: Callable[[], None] | None = None,
    aws: Aws | None = None,
) -> None:
    """Call `on_line` for each new line until `should_stop()`; waits for a group not there yet."""
    aws = aws or Aws()
    group = log_group(name)
    start = since_ms if since_ms is not None else int(time.time() * 1000)
    seen: set[str] = set()
    told_waiting = False
    while not should_stop():
        with aws_errors(f"follow the log group {group}", region, "logs"):
            try:
                token: str | None = None
                newest = start
                while True:
                    kwargs: dict[str, object] = {"logGroupName": group, "startTime": start}
                    if token:
                        kwargs["nextToken"] = token
                    response = aws.logs(region).filter_log_events(**kwargs)  # type: ignore[arg-type]
                    for event in response.get("events", []):
                        line = _line(dict(event))
                        key = line.event_id or f"{line.timestamp_ms}:{line.stream}:{line.message}"
                        if key in seen:
                            continue
                        seen.add(key)
                        newest = max(newest, line.timestamp_ms)
                        on_line(line)
                    token = response.get("nextToken")
                    if not token:
                        break
                start = newest
            except ClientError as exc:
                if not _missing(exc):
                    raise
                if on_waiting and not told_waiting:
                    on_waiting()
                    told_waiting = True
        time.sleep(poll_s)


def _events(
    aws: Aws, name: str, region: str, start_ms: int | None, pattern: str | None, cap: int
) -> list[LogLine] | None:
    lines: list[LogLine] = []
    token: str | None = None
    while len(lines) < cap:
        kwargs: dict[str, object] = {"logGroupName": log_group(name)}
        if start_ms is not None:
            kwargs["startTime"] = start_ms
        if pattern:
            kwargs["filterPattern"] = pattern
        if token:
            kwargs["nextToken"] = token
        try:
            response = aws.logs(region).filter_log_events(**kwargs)  # type: ignore[arg-type]
        except ClientError as exc:
            if _missing(exc):
                return None
            raise
        lines.extend(_line(dict(e)) for e in response.get("events", []))
        token = response.get("nextToken")
        if not token:
            break
    lines.sort(key=lambda line: line.timestamp_ms)
    return lines


def _has_facts(facts: StartupFacts) -> bool:
    return any(
        value is not None
        for value in (
            facts.weights_gib,
            facts.load_seconds,
            facts.kv_cache_tokens,
            facts.quantization,
        )
    )


def startup_facts(
    name: str, region: str, *, since: datetime | None = None, aws: Aws | None = None
) -> StartupFacts | None:
    """vLLM's start-up facts from the endpoint's CloudWatch log, for the result file of `measure`.

    None when the log holds no start-up lines (no log group yet, or nothing vLLM printed). Never
    raises: when the log cannot be read, the facts say so in `source` ("unavailable: why"), so a
    finished measurement is never lost to a missing logs permission. `since` defaults to the
    endpoint's CreationTime while it exists, so a redeployed name reports its current container.
    """
    try:
        aws = aws or Aws()
        if since is None:
            since = deployment_start(name, region, aws)
        start_ms = int(since.timestamp() * 1000) if since else None
        with aws_errors(f"read the start-up log of {name}", region, "logs"):
            lines = _events(aws, name, region, start_ms, STARTUP_FILTER, UNFILTERED_SCAN_LIMIT)
            if lines is None:
                return None
            facts = parse_vllm_log(line.message for line in lines)
            if not _has_facts(facts):
                # A filter the service reads differently must not hide the facts: scan plainly.
                lines = _events(aws, name, region, start_ms, None, UNFILTERED_SCAN_LIMIT) or []
                facts = parse_vllm_log(line.message for line in lines)
    except UserError as exc:
        return StartupFacts(source=f"unavailable: {exc}")
    if not _has_facts(facts):
        return None
    facts.source = f"vllm log (CloudWatch {log_group(name)}, {region})"
    return facts


def _creation_time(aws: Aws, name: str, region: str) -> datetime | None:
    try:
        created = aws.sagemaker(region).describe_endpoint(EndpointName=name)["CreationTime"]
    except (ClientError, BotoCoreError, KeyError):
        return None
    return created
