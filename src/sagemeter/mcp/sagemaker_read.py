"""The SageMaker tools that only look: quota, price, status, list, logs, invoke."""

import time
from collections.abc import Callable
from typing import Annotated, TypeVar

import anyio.to_thread
from mcp.server import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from sagemeter import sagemaker as sm
from sagemeter.errors import UserError
from sagemeter.limits import MAX_PRICE_PER_HOUR
from sagemeter.mcp.config import ServerConfig
from sagemeter.mcp.guard import guarded, reply, require_logs
from sagemeter.mcp.models import InvokeAnswer, QuotaAnswer
from sagemeter.sagemaker.verbs import deploy_region, endpoint_region

T = TypeVar("T")
LOOKS = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)

InstanceType = Annotated[str, Field(description="SageMaker instance type, e.g. ml.g6.xlarge")]
Endpoint = Annotated[
    str,
    Field(description="NAME@REGION, or NAME alone when its region is recorded or configured"),
]
Region = Annotated[str | None, Field(description="AWS region such as us-east-2")]
Regions = Annotated[
    list[str] | None,
    Field(description="AWS regions to look in; default: recorded, configured and the usual"),
]
QuotaRegions = Annotated[
    list[str] | None,
    Field(description="AWS regions to look in; default: configured, us-east-1/2, us-west-2"),
]
PricePerHour = Annotated[
    float | None,
    Field(
        gt=0,
        le=MAX_PRICE_PER_HOUR,
        allow_inf_nan=False,
        description="USD per instance-hour to use instead of the AWS Price List",
    ),
]


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


def register_sagemaker_reads(server: MCPServer, config: ServerConfig) -> None:
    """Add the looking SageMaker tools to `server`."""

    @server.tool(title="Check SageMaker quota", annotations=LOOKS)
    @guarded
    async def check_quota(
        instance_type: InstanceType, regions: QuotaRegions = None
    ) -> Annotated[CallToolResult, QuotaAnswer]:
        """Endpoint quota for an instance type per region, how many are in use and how many free.

        Use before deploy_endpoint to pick a region: quota is per instance type and region.
        """
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
    async def get_price(
        instance_type: InstanceType,
        region: Region = None,
        refresh: Annotated[
            bool, Field(description="ask the AWS Price List again instead of the cache")
        ] = False,
    ) -> Annotated[CallToolResult, sm.PriceQuote]:
        """On-demand USD per hour of one real-time Hosting instance (AWS Price List, cached)."""

        def look() -> sm.PriceQuote:
            aws = sm.Aws()
            where = deploy_region(region, aws, label="region")
            aws.require_credentials()
            return sm.hourly_price(instance_type, where, refresh=refresh, aws=aws)

        quote = await blocking(look)
        text = (
            f"{quote.instance_type} in {quote.region}: {money(quote.usd_per_hour, 4)} per hour "
            f"({quote.source}, {quote.fetched_utc[:10]})"
        )
        return reply(text, quote)

    @server.tool(title="Endpoint status", annotations=LOOKS)
    @guarded
    async def endpoint_status(
        endpoint: Endpoint, region: Region = None, price_per_hour: PricePerHour = None
    ) -> Annotated[CallToolResult, sm.EndpointInfo]:
        """One endpoint: status, instance type, age, price and cost so far; whoever made it."""

        def look() -> sm.EndpointInfo:
            aws = sm.Aws()
            name, where = endpoint_region(endpoint, region, aws, label="region")
            return sm.endpoint_status(name, where, price_per_hour=price_per_hour, aws=aws)

        info = await blocking(look)
        return reply(info_line(info), info)

    @server.tool(title="List sagemeter's endpoints", annotations=LOOKS)
    @guarded
    async def list_endpoints(
        regions: Regions = None,
        price_per_hour: PricePerHour = None,
        all_endpoints: Annotated[
            bool, Field(description="every endpoint in the regions, not only sagemeter's")
        ] = False,
    ) -> Annotated[CallToolResult, sm.Inventory]:
        """Every endpoint sagemeter made (tagged or recorded), with cost so far; orphans marked.

        Also shows what an interrupted or cancelled deploy left, so nothing keeps billing unseen.
        With all_endpoints, every other endpoint too, marked "not sagemeter's".
        """
        inventory = await blocking(
            lambda: sm.list_endpoints(
                regions or None,
                price_per_hour=price_per_hour,
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
    async def endpoint_logs(
        endpoint: Endpoint,
        region: Region = None,
        lines: Annotated[int, Field(ge=1, le=1000, description="how many recent lines")] = 50,
    ) -> Annotated[CallToolResult, sm.LogsResult]:
        """Recent lines of the endpoint's CloudWatch container log (needs --allow-logs).

        No log group yet means the container has not started yet, not an error.
        """
        require_logs(config, "endpoint_logs")

        def read() -> sm.LogsResult:
            aws = sm.Aws()
            aws.require_credentials()
            name, where = endpoint_region(endpoint, region, aws, label="region")
            return sm.recent_logs(name, where, limit=lines, aws=aws)

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
    async def invoke_endpoint(
        endpoint: Endpoint,
        prompt: Annotated[str, Field(min_length=1, description="the user message")],
        max_tokens: Annotated[int, Field(ge=1, le=8192, description="reply length cap")] = 256,
        temperature: Annotated[float, Field(ge=0, le=2, description="sampling temperature")] = 0.0,
    ) -> Annotated[CallToolResult, InvokeAnswer]:
        """Send one chat message to a SageMaker endpoint through its runtime; returns the reply."""

        def send() -> InvokeAnswer:
            name, where = endpoint_region(endpoint, None, label="region")
            record = sm.invoke(name, where, prompt, max_tokens=max_tokens, temperature=temperature)
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
