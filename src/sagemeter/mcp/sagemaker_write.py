"""The SageMaker tools that change the account: deploy and delete (both need --allow-write).

Both are long: they send progress notifications while they wait, and a cancelled call stops at
its next poll, leaving the ledger record `list_endpoints` shows. Delete asks for `confirm` equal
to the endpoint's name and, like the CLI, removes only what carries sagemeter's tag.
"""

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from sagemeter import sagemaker as sm
from sagemeter.errors import UserError
from sagemeter.mcp.config import ServerConfig
from sagemeter.mcp.guard import guarded, reply, require_write
from sagemeter.mcp.models import DeployAnswer
from sagemeter.mcp.progress import Relay, in_worker
from sagemeter.mcp.sagemaker_read import Endpoint, Region, blocking, given_options
from sagemeter.mcp.server_tools import ServerTools
from sagemeter.options.faces import with_options
from sagemeter.options.sagemaker import DEPLOY, DeployOptions
from sagemeter.sagemaker.verbs import (
    container_env,
    deploy_region,
    endpoint_region,
    execution_role,
    image_line,
    placed_text,
)

CREATES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)
DELETES = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True
)
GRACE_S = 60.0  # beyond one poll: how long a cancelled call waits for the backend to record it


class ProgressLines:
    """Backend `Progress` → numbered notifications; log lines only with --allow-logs."""

    def __init__(self, relay: Relay, with_logs: bool) -> None:
        self.relay = relay
        self.with_logs = with_logs
        self.count = 0

    def __call__(self, progress: sm.Progress, check: Callable[[], None]) -> None:
        check()
        self.count += 1
        status = f" {progress.status}" if progress.status else ""
        text = (
            f"{progress.name}@{progress.region} {progress.phase}{status}, "
            f"{progress.elapsed_s / 60:.1f} min"
        )
        if self.with_logs and progress.log_line:
            text += f" | {progress.log_line[:200]}"
        self.relay.post_from_thread(self.count, None, text)


def deploy_text(result: sm.DeployResult) -> str:
    lines = []
    for attempt in result.attempts[:-1]:
        lines.append(f"{attempt.region}: {attempt.outcome}: {attempt.reason or ''}")
        lines.extend(delete_lines(c) for c in result.cleanups if c.region == attempt.region)
    lines.extend(delete_lines(c) for c in result.cleanups if c.region == result.region)
    lines.append(image_line(result))
    target = f"{result.name}@{result.region}"
    if result.in_service:
        lines.append(
            f"{target} InService after {result.create_to_inservice_minutes:.1f} min "
            f"({placed_text(result)}); it bills until "
            f"deleted (delete_endpoint endpoint={target} confirm={result.name})"
        )
    elif result.timed_out:
        lines.append(result.note or f"{target} is still {result.status}")
    else:
        lines.append(f"{target} {result.status or 'failed'}: {result.failure_reason or ''}")
        if result.note:
            lines.append(result.note)
    return "\n".join(lines)


def delete_lines(report: sm.DeleteReport) -> str:
    lines = [f"{report.name} in {report.region}:"]
    if report.error:
        lines.append(f"error: {report.error}")
    lines.extend(f"{step.kind}: {step.outcome} ({step.name})" for step in report.steps)
    return "\n".join(lines)


def register_sagemaker_writes(server: ServerTools, config: ServerConfig) -> None:
    """Add deploy_endpoint and delete_endpoint to `server`."""

    @server.tool(title="Deploy a checkpoint to SageMaker", annotations=CREATES)
    @guarded
    @with_options(DEPLOY, "mcp")  # name, model_id, region, …: deploy's options model
    async def deploy_endpoint(
        ctx: Context,
        # The tool's own (sagemeter.options.sagemaker says why): the environment as one object
        env: Annotated[
            dict[str, str] | None,
            Field(
                description="container environment; never put tokens here (the server passes "
                "its own HF_TOKEN)"
            ),
        ] = None,
        **options: Any,
    ) -> Annotated[CallToolResult, DeployAnswer]:
        """Create model, endpoint config and endpoint (tagged, recorded) and wait for InService.

        Needs --allow-write (except a dry run). It bills per instance-hour until deleted; check
        quota first. Cancelling stops the wait, not the endpoint: it stays recorded, and
        list_endpoints shows it. HF_TOKEN is taken from the server's environment.
        """
        given = given_options(DEPLOY, DeployOptions, options)
        dry_run = given.dry_run
        if not dry_run:
            require_write(config, "deploy_endpoint", "creates an endpoint that bills per hour")

        def make_spec(aws: sm.Aws | None) -> sm.DeploySpec:
            return sm.make_spec(
                name=given.name,
                model_id=given.model,
                region=deploy_region(given.region, aws, label="region"),
                role_arn=execution_role(given.role_arn, label="role_arn"),
                instance_type=given.instance_type,
                fallback_instance_types=given.fallback_instance_types or [],
                fallback_regions=given.fallback_regions or [],
                env=container_env(env or {}),
                count=given.count,
                image=given.image,
                image_tag=given.image_tag,
                max_model_len=given.max_model_len,
                gpu_memory_utilization=given.gpu_memory_utilization,
            )

        def plan() -> list[sm.PlannedRegion]:
            aws = sm.Aws()
            lookup = aws if aws.session.get_credentials() is not None else None
            return sm.plan_deploy(make_spec(aws), aws=lookup)

        if dry_run:
            plans = await blocking(plan)
            text = "\n".join(
                f"{plan.region}: would create model, endpoint config and endpoint "
                f"{given.name} ({plan.image})"
                for plan in plans
            )
            return reply(text, DeployAnswer(dry_run=True, plans=plans))

        async with Relay(ctx) as relay:
            lines = ProgressLines(relay, config.allow_logs)

            def work(check: Callable[[], None]) -> sm.DeployResult:
                aws = sm.Aws()
                return sm.deploy(
                    make_spec(aws),
                    on_progress=lambda progress: lines(progress, check),
                    deadline_s=given.deadline_minutes * 60,
                    poll_s=config.poll_s,
                    price_per_hour=given.price_per_hour,
                    aws=aws,
                )

            result = await in_worker(work, grace_s=config.poll_s + GRACE_S)
        return reply(deploy_text(result), DeployAnswer(dry_run=False, result=result))

    @server.tool(title="Delete a sagemeter endpoint", annotations=DELETES)
    @guarded
    async def delete_endpoint(
        ctx: Context,
        endpoint: Endpoint,
        confirm: Annotated[
            str,
            Field(description="the endpoint's name again, after the user agreed to delete it"),
        ],
        region: Region = None,
        wait: Annotated[
            bool, Field(description="wait out an endpoint still Creating (it cannot be deleted)")
        ] = True,
    ) -> Annotated[CallToolResult, sm.DeleteReport]:
        """Delete endpoint, endpoint config and model, only those tagged as sagemeter's.

        Needs --allow-write, and `confirm` equal to the endpoint's name. Reports each resource:
        "endpoint: deleted", "endpoint-config: deleted", "model: deleted".
        """
        require_write(config, "delete_endpoint", "deletes an endpoint")
        aws = await blocking(sm.Aws)
        name, where = await blocking(lambda: endpoint_region(endpoint, region, aws, label="region"))
        if confirm.strip() not in {name, f"{name}@{where}"}:
            raise UserError(
                f"confirm must be the endpoint's name {name!r}: ask the user to confirm deleting "
                f"{name} in {where}, then call again with confirm={name!r}"
            )
        async with Relay(ctx) as relay:
            lines = ProgressLines(relay, with_logs=False)
            report = await in_worker(
                lambda check: sm.delete(
                    name,
                    where,
                    no_wait=not wait,
                    on_progress=lambda progress: lines(progress, check),
                    poll_s=config.poll_s,
                    aws=aws,
                ),
                grace_s=config.poll_s + GRACE_S,
            )
        return reply(delete_lines(report), report)
