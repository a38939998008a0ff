"""The endpoint's CloudWatch log: recent lines, following, the newest line, and start-up facts.

SageMaker writes each instance's container output to `/aws/sagemaker/Endpoints/NAME`, one stream
per instance (`AllTraffic/i-…`). The group appears only once a container has started, so a missing
group means "no logs yet", never an error. The group outlives the endpoint: a name deployed again
(A-B-A) appends new streams, so start-up facts are read from the current endpoint's lifetime.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel

from sagemeter.backends.sagemaker.aws import Aws, aws_errors, error_code
from sagemeter.backends.sagemaker.redact import redact
from sagemeter.errors import UserError
from sagemeter.results import StartupFacts
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


def _missing(exc: ClientError) -> bool:
    return error_code(exc) == "ResourceNotFoundException"


def _line(event: dict[str, object], stream: str | None = None) -> LogLine:
    return LogLine(
        timestamp_ms=int(event.get("timestamp") or 0),  # type: ignore[call-overload]
        stream=str(stream or event.get("logStreamName") or ""),
        message=redact(str(event.get("message") or "").rstrip("\n")),
        event_id=str(event["eventId"]) if event.get("eventId") else None,
    )


def _newest_streams(aws: Aws, name: str, region: str, count: int) -> list[str] | None:
    """Names of the `count` streams with the newest events; None when the group is missing."""
    try:
        response = aws.logs(region).describe_log_streams(
            logGroupName=log_group(name), orderBy="LastEventTime", descending=True, limit=count
        )
    except ClientError as exc:
        if _missing(exc):
            return None
        raise
    return [s["logStreamName"] for s in response.get("logStreams", []) if "logStreamName" in s]


def recent_logs(name: str, region: str, *, limit: int = 50, aws: Aws | None = None) -> LogsResult:
    """The last `limit` lines across the newest streams, oldest first."""
    aws = aws or Aws()
    group = log_group(name)
    with aws_errors(f"read the log group {group}", region, "logs"):
        streams = _newest_streams(aws, name, region, 3)
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
    return LogsResult(name=name, region=region, group=group, exists=True, lines=lines[-limit:])


def newest_log_line(name: str, region: str, aws: Aws) -> str | None:
    """The newest line of the newest stream, for a progress line; None before the group exists."""
    try:
        streams = _newest_streams(aws, name, region, 1)
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
            since = _creation_time(aws, name, region)
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
