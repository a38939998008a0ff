"""The SageMaker tools that only look: quota, price, status, list, logs, invoke."""

import time
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import anyio.to_thread
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from sagemeter import sagemaker as sm
from sagemeter.errors import UserError
from sagemeter.mcp.config import ServerConfig
from sagemeter.mcp.guard import guarded, reply, require_logs
from sagemeter.mcp.models import InvokeAnswer, QuotaAnswer
from sagemeter.mcp.server_tools import ServerTools
from sagemeter.options.base import OptionsModel
from sagemeter.options.command import Command
from sagemeter.options.faces import read_options, with_options
from sagemeter.options.sagemaker import (
    INVOKE,
    LIST,
    LOGS,
    PRICE,
    QUOTA,
    STATUS,
    InvokeOptions,
    ListOptions,
    LogsOptions,
    PriceOptions,
    QuotaOptions,
    StatusOptions,
)
from sagemeter.sagemaker.verbs import deploy_region, endpoint_region

T = TypeVar("T")
M = TypeVar("M", bound=OptionsModel)
LOOKS = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)

InstanceType = Annotated[str, Field(description="SageMaker instance type, e.g. ml.g6.xlarge")]
Endpoint = Annotated[
    str,
    Field(description="NAME@REGION, or NAME alone when its region is recorded or configured"),
]
# A tool's other arguments (region, regions, price_per_hour, …) are its verb's options model
# (`sagemeter.options.sagemaker`), shared with the command line's flags.
Region = Annotated[str | None, Field(description="AWS region such as us-east-2")]


def given_options(command: Command, model: type[M], options: dict[str, Any]) -> M:
    """A tool's arguments as its verb's options model, checked before any work."""
    (given,) = read_options(command, options, "mcp")
    assert isinstance(given, model)
    return given


async def blocking(call: Callable[[], T]) -> T:
    """A short boto3 call off the event loop (a cancelled request abandons it)."""
    return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)


def money(value: float | None, digits: int = 2) -> str:
    return "?" if value is None else f"${value:,.{digits}f}"


def info_line(info: sm.EndpointInfo) -> str:
    """One endpoint as a line: status, instances, age, price, cost so far, note."""
    count = f" x{info.instance_count}" if info.instance_count else ""
    parts = [
        f"{info.name}@{info.region}: {info.status or 'not in AWS'}",
        (" / ".join(info.instance_types) or "?") + count,
    ]
    if info.age_minutes is not None:
        parts.append(f"{info.age_minutes:.0f} min old")
    if info.hourly_usd is not None:
        parts.append(f"{money(info.hourly_usd, 4)}/h")
    if info.cost_so_far_usd is not None:
        parts.append(f"{money(info.cost_so_far_usd)} so far")
    notes = [note for note in (info.note, info.failure_reason) if note]
    if info.hourly_usd is None and info.price_note:
        notes.append(f"no price: {info.price_note}")
    if info.leftovers and info.status is None:
        notes.append("left: " + ", ".join(info.leftovers))
    return ", ".join(parts) + (f" ({'; '.join(notes)})" if notes else "")


def register_sagemaker_reads(server: ServerTools, config: ServerConfig) -> None:
    """Add the looking SageMaker tools to `server`."""

    @server.tool(title="Check SageMaker quota", annotations=LOOKS)
    @guarded
    @with_options(QUOTA, "mcp")  # regions
    async def check_quota(
        instance_type: InstanceType, **options: Any
    ) -> Annotated[CallToolResult, QuotaAnswer]:
        """Endpoint quota for an instance type per region, how many are in use and how many free.

        Use before deploy_endpoint to pick a region: quota is per instance type and region.
        """
        regions = given_options(QUOTA, QuotaOptions, options).regions
        rows = await blocking(lambda: sm.quota(instance_type, regions or None, aws=sm.Aws()))
        lines = []
        for row in rows:
            if row.error:
                lines.append(f"{row.region}: {row.error}")
                continue
            quota = "?" if row.quota is None else f"{row.quota:g}"
            free = "?" if row.free is None else f"{row.free:g}"
            note = f" ({row.in_use_note})" if row.in_use_note else ""
            lines.append(
                f"{row.region}: quota {quota} ({row.quota_source}), in use {row.in_use}, "
                f"free {free}{note}"
            )
        answer = QuotaAnswer(instance_type=instance_type, rows=rows)
        return reply(f"{instance_type} for endpoint usage\n" + "\n".join(lines), answer)

    @server.tool(title="Look up an instance price", annotations=LOOKS)
    @guarded
    @with_options(PRICE, "mcp")  # region, refresh
    async def get_price(
        instance_type: InstanceType, **options: Any
    ) -> Annotated[CallToolResult, sm.PriceQuote]:
        """On-demand USD per hour of one real-time Hosting instance (AWS Price List, cached)."""
        given = given_options(PRICE, PriceOptions, options)

        def look() -> sm.PriceQuote:
            aws = sm.Aws()
            where = deploy_region(given.region, aws, label="region")
            aws.require_credentials()
            return sm.hourly_price(instance_type, where, refresh=given.refresh, aws=aws)

        quote = await blocking(look)
        text = (
            f"{quote.instance_type} in {quote.region}: {money(quote.usd_per_hour, 4)} per hour "
            f"({quote.source}, {quote.fetched_utc[:10]})"
        )
        return reply(text, quote)

    @server.tool(title="Endpoint status", annotations=LOOKS)
    @guarded
    @with_options(STATUS, "mcp")  # region, price_per_hour
    async def endpoint_status(
        endpoint: Endpoint, **options: Any
    ) -> Annotated[CallToolResult, sm.EndpointInfo]:
        """One endpoint: status, instance type, age, price and cost so far; whoever made it."""
        given = given_options(STATUS, StatusOptions, options)

        def look() -> sm.EndpointInfo:
            aws = sm.Aws()
            name, where = endpoint_region(endpoint, given.region, aws, label="region")
            return sm.endpoint_status(name, where, price_per_hour=given.price_per_hour, aws=aws)

        info = await blocking(look)
        return reply(info_line(info), info)

    @server.tool(title="List sagemeter's endpoints", annotations=LOOKS)
    @guarded
    @with_options(LIST, "mcp")  # regions, price_per_hour, all_endpoints
    async def list_endpoints(**options: Any) -> Annotated[CallToolResult, sm.Inventory]:
        """Every endpoint sagemeter made (tagged or recorded), with cost so far; orphans marked.

        Also shows what an interrupted or cancelled deploy left, so nothing keeps billing unseen.
        With all_endpoints, every other endpoint too, marked "not sagemeter's".
        """
        given = given_options(LIST, ListOptions, options)
        all_endpoints = given.all_endpoints
        inventory = await blocking(
            lambda: sm.list_endpoints(
                given.regions or None,
                price_per_hour=given.price_per_hour,
                all_endpoints=all_endpoints,
                aws=sm.Aws(),
            )
        )
        lines = [info_line(info) for info in inventory.endpoints]
        if not lines:
            kind = "" if all_endpoints else "sagemeter "
            lines.append(f"no {kind}endpoints in {', '.join(inventory.regions)}")
        lines.extend(sm.billing_lines(inventory, delete_with="delete_endpoint"))
        lines.extend(f"warning: {where}: {why}" for where, why in inventory.region_errors.items())
        return reply("\n".join(lines), inventory)

    @server.tool(title="Read an endpoint's log", annotations=LOOKS)
    @guarded
    @with_options(LOGS, "mcp")  # region, lines
    async def endpoint_logs(
        endpoint: Endpoint, **options: Any
    ) -> Annotated[CallToolResult, sm.LogsResult]:
        """Recent lines of the endpoint's CloudWatch container log (needs --allow-logs).

        No log group yet means the container has not started yet, not an error.
        """
        given = given_options(LOGS, LogsOptions, options)
        require_logs(config, "endpoint_logs")

        def read() -> sm.LogsResult:
            aws = sm.Aws()
            aws.require_credentials()
            name, where = endpoint_region(endpoint, given.region, aws, label="region")
            return sm.recent_logs(name, where, limit=given.lines, aws=aws)

        result = await blocking(read)
        if not result.exists:
            elsewhere = sm.placed_elsewhere(result.name, result.region)
            text = f"no logs yet for {result.name} in {result.region} " + (
                f"({elsewhere})"
                if elsewhere
                else f"({result.group} appears once the container starts)"
            )
        else:
            text = "\n".join(
                time.strftime("%H:%M:%S ", time.gmtime(line.timestamp_ms / 1000)) + line.message
                for line in result.lines
            )
            text = "\n".join(part for part in (result.note, text) if part)
        return reply(text or f"{result.group} has no lines yet", result)

    @server.tool(title="Send one prompt to an endpoint", annotations=LOOKS)
    @guarded
    @with_options(INVOKE, "mcp")  # max_tokens, temperature
    async def invoke_endpoint(
        endpoint: Endpoint,
        prompt: Annotated[str, Field(min_length=1, description="the user message")],
        **options: Any,
    ) -> Annotated[CallToolResult, InvokeAnswer]:
        """Send one chat message to a SageMaker endpoint through its runtime; returns the reply."""
        given = given_options(INVOKE, InvokeOptions, options)

        def send() -> InvokeAnswer:
            name, where = endpoint_region(endpoint, None, label="region")
            record = sm.invoke(
                name,
                where,
                prompt,
                max_tokens=given.max_tokens,
                temperature=given.temperature,
            )
            if not record.ok:
                elsewhere = sm.placed_elsewhere(name, where)
                hint = f" ({elsewhere})" if elsewhere else ""
                raise UserError(f"{name}@{where} did not answer: {record.error}{hint}")
            return InvokeAnswer(
                endpoint=f"{name}@{where}",
                text=record.text,
                completion_tokens=record.usage_tokens,
                total_s=record.total_s,
                first_token_s=record.first_token_s,
                finish_reason=record.finish_reason,
            )

        answer = await blocking(send)
        tokens = "?" if answer.completion_tokens is None else str(answer.completion_tokens)
        footer = f"({tokens} tokens in {answer.total_s:.2f} s, finish: {answer.finish_reason})"
        return reply(f"{answer.text}\n{footer}", answer)
