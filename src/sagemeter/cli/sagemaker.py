"""The SageMaker commands of the CLI: quota, price, role, deploy, status, list, logs, invoke,
delete (and recommend, in sagemaker_recommend.py).

Thin: each command parses its options, calls one function of `sagemeter.sagemaker`, and
draws the answer with rich. A sagemeter error (and any AWS error) is one line on stderr and
its kind's exit code (`errors.exit_code`: 2 bad input, 4 the cloud refused or failed); Ctrl-C
says what still runs and how to remove it, and exits 130.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

import typer
from botocore.exceptions import BotoCoreError, ClientError
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from sagemeter import sagemaker as sm
from sagemeter.errors import ManyProblems, UserError, exit_code
from sagemeter.options.base import OptionsModel
from sagemeter.options.command import Command
from sagemeter.options.faces import read_options, with_options
from sagemeter.options.sagemaker import (
    DEPLOY,
    INVOKE,
    LIST,
    LOGS,
    PRICE,
    QUOTA,
    STATUS,
    DeployOptions,
    InvokeOptions,
    ListOptions,
    LogsOptions,
    PriceOptions,
    QuotaOptions,
    StatusOptions,
)
from sagemeter.printable import SafeConsole, printable
from sagemeter.redaction import StreamRedaction, redact_tree
from sagemeter.sagemaker.aws import explain
from sagemeter.sagemaker.endpoint import DEFAULT_POLL_S
from sagemeter.sagemaker.redact import redact
from sagemeter.sagemaker.verbs import (
    ROLE_ENV,
    container_env,
    deploy_region,
    endpoint_region,
    execution_role,
    image_line,
    placed_text,
)

P = ParamSpec("P")
R = TypeVar("R")

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def _out() -> Console:
    console = SafeConsole(highlight=False, soft_wrap=True)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = max(console.width, 160)  # piped tables: wide rather than cut
    return console


def _err() -> Console:
    return SafeConsole(stderr=True, highlight=False, soft_wrap=True)


def _error_line(message: str, *, lines: bool = False) -> None:
    """`error: …` on stderr; `lines` keeps the newlines of a message of one problem a line."""
    shown = printable(redact(message), keep_newlines=lines)
    _err().print(f"[red]error:[/] {escape(shown)}")


def guarded(fn: Callable[P, R]) -> Callable[P, R]:
    """Sagemeter's errors and AWS errors become one line on stderr and their kind's exit code
    (an AWS error is the cloud's: exit 4), never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            _error_line(str(exc), lines=isinstance(exc, ManyProblems))
            raise typer.Exit(exit_code(exc)) from None
        except (ClientError, BotoCoreError) as exc:
            explained = explain(exc, "complete the request")
            _error_line(str(explained))
            raise typer.Exit(exit_code(explained)) from None

    return wrapper


def _aws() -> sm.Aws:
    return sm.Aws()


M = TypeVar("M", bound=OptionsModel)


def _read(command: Command, model: type[M], options: dict[str, Any]) -> M:
    """A verb's flags as its options model, checked before any work (one line, exit 2)."""
    (given,) = read_options(command, options, "cli")
    assert isinstance(given, model)
    return given


def _parse_env(pairs: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(
                f"--env {pair!r}: write KEY=VALUE, e.g. --env SM_VLLM_MAX_MODEL_LEN=8192"
            )
        env[key] = value
    return container_env(env)  # its secret values are remembered, so they are masked


class ProgressLine:
    """A live status line on a terminal; elsewhere one printed line per change of state."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.latest: sm.Progress | None = None
        self._stamp = time.monotonic()
        self._printed: tuple[str, str | None] | None = None
        self._live = (
            Live(self, console=console, refresh_per_second=2, transient=True)
            if console.is_terminal
            else None
        )

    def __enter__(self) -> ProgressLine:
        if self._live:
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live:
            self._live.stop()

    def __call__(self, progress: sm.Progress) -> None:
        self.latest = progress
        self._stamp = time.monotonic()
        if self._live is None:
            key = (progress.phase, progress.status)
            if key != self._printed:
                self._printed = key
                self.console.print(self._text(progress, progress.elapsed_s))

    def _text(self, progress: sm.Progress, elapsed_s: float) -> Text:
        status = f" {progress.status}" if progress.status else ""
        line = Text(
            f"⏳ {progress.name}@{progress.region}  {progress.phase}{status}  "
            f"{elapsed_s / 60:.1f} min"
        )
        if progress.log_line:
            width = max(self.console.width - len(line) - 4, 20)
            line.append(f"  │ {redact(progress.log_line)[:width]}", style="dim")
        return line

    def __rich__(self) -> Text:
        if self.latest is None:
            return Text("")
        ticking = self.latest.elapsed_s + (time.monotonic() - self._stamp)
        return self._text(self.latest, ticking)


def _money(value: float | None, digits: int = 2) -> str:
    return "?" if value is None else f"${value:,.{digits}f}"


# --------------------------------------------------------------------------- quota


@guarded
def quota_command(
    instance_type: Annotated[str, typer.Argument(help="e.g. ml.g6.xlarge")],
    **options: Any,
) -> None:
    """Endpoint quota for an instance type per region, and how many this account already uses."""
    given = _read(QUOTA, QuotaOptions, options)
    rows = sm.quota(instance_type, given.regions or None, aws=_aws())
    table = Table(title=f"{instance_type} for endpoint usage")
    for column in ("region", "quota", "source", "in use", "free", "note"):
        justify: Literal["left", "right"] = (
            "right" if column in {"quota", "in use", "free"} else "left"
        )
        table.add_column(column, justify=justify, overflow="fold")
    for row in rows:
        table.add_row(
            row.region,
            "?" if row.quota is None else f"{row.quota:g}",
            row.quota_source or "",
            ("?" if row.in_use is None else str(row.in_use)) + ("+?" if row.in_use_note else ""),
            "?" if row.free is None else f"{row.free:g}",
            escape(redact("; ".join(n for n in (row.error, row.in_use_note) if n))),
        )
    _out().print(table)


# --------------------------------------------------------------------------- price


@guarded
def price_command(
    instance_type: Annotated[str, typer.Argument(help="e.g. ml.g6.xlarge")],
    **options: Any,
) -> None:
    """On-demand USD per hour of one real-time Hosting instance (AWS Price List API, cached)."""
    given = _read(PRICE, PriceOptions, options)
    aws = _aws()
    region = deploy_region(given.region, aws)
    if given.price_per_hour is None:
        aws.require_credentials()
    quote = sm.hourly_price(
        instance_type,
        region,
        refresh=given.refresh,
        price_per_hour=given.price_per_hour,
        aws=aws,
    )
    _out().print(
        f"{quote.instance_type} in {quote.region}: {_money(quote.usd_per_hour, 4)} per hour "
        f"({quote.source}, {quote.fetched_utc[:10]})"
    )
    if quote.description:
        _out().print(f"  {escape(quote.description)}", style="dim")


# --------------------------------------------------------------------------- deploy


@guarded
def deploy_command(
    poll_seconds: Annotated[float, typer.Option(hidden=True)] = DEFAULT_POLL_S,
    **options: Any,
) -> None:
    """Create model, endpoint config and endpoint (tagged, recorded), and wait for InService."""
    given = _read(DEPLOY, DeployOptions, options)
    aws = _aws()  # no network yet: the session only reads the configuration
    region = deploy_region(given.region, aws)
    role_arn = execution_role(given.role_arn)
    spec = sm.make_spec(
        name=given.name,
        model_id=given.model,
        region=region,
        role_arn=role_arn,
        instance_type=given.instance_type,
        fallback_instance_types=given.fallback_instance_types or [],
        fallback_regions=given.fallback_regions or [],
        env=_parse_env(given.env or []),
        image=given.image,
        image_tag=given.image_tag,
        max_model_len=given.max_model_len,
        gpu_memory_utilization=given.gpu_memory_utilization,
        count=given.count,
        inference_ami_version=given.inference_ami,
        startup_timeout_s=given.startup_timeout,
        download_timeout_s=given.download_timeout,
        provision_timeout_s=given.provision_timeout,
    )
    out, err = _out(), _err()
    if given.dry_run:
        # The image lookup is a read; without credentials the plan shows the fallback and says so.
        lookup = aws if aws.session.get_credentials() is not None else None
        plans = [plan.model_dump() for plan in sm.plan_deploy(spec, aws=lookup)]
        out.print_json(json.dumps(redact_tree(plans)))
        return
    token = "set: passed to the container, never shown" if os.environ.get("HF_TOKEN") else "not set"
    regions = " then ".join(spec.regions)
    err.print(
        f"deploying {spec.name}: {escape(spec.model_id)} on {' / '.join(spec.instance_types)} "
        f"x{spec.count} in {regions}; HF_TOKEN {token}"
    )
    progress = ProgressLine(err)
    try:
        with progress:
            result = sm.deploy(
                spec,
                on_progress=progress,
                deadline_s=given.deadline_minutes * 60,
                poll_s=poll_seconds,
                price_per_hour=given.price_per_hour,
                aws=aws,
            )
    except KeyboardInterrupt:
        where = progress.latest.region if progress.latest else spec.region
        err.print(
            f"interrupted: {spec.name} in {where} may still be creating (it bills once InService). "
            "It is recorded: `sagemeter sagemaker list` shows it, "
            f"`sagemeter sagemaker delete {spec.name}@{where}` removes it"
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    _print_deploy(result, out, err)
    if not result.in_service:
        raise typer.Exit(EXIT_FAILED)


def _print_deploy(result: sm.DeployResult, out: Console, err: Console) -> None:
    for attempt in result.attempts[:-1]:
        err.print(f"  {attempt.region}: {attempt.outcome}: {escape(redact(attempt.reason or ''))}")
        for cleanup in (c for c in result.cleanups if c.region == attempt.region):
            _print_delete(cleanup, err)
    for cleanup in (c for c in result.cleanups if c.region == result.region):
        _print_delete(cleanup, err)
    err.print(escape(image_line(result)))
    target = f"{result.name}@{result.region}"
    if result.in_service:
        out.print(
            f"✅ {target} InService after {result.create_to_inservice_minutes:.1f} min "
            f"({escape(placed_text(result))}); it bills until deleted"
        )
        out.print(f'   invoke:  sagemeter sagemaker invoke {target} "Hello"')
        out.print(f"   measure: sagemeter measure OUT_DIR {target}")
        out.print(f"   delete:  sagemeter sagemaker delete {target}")
        return
    if result.timed_out:
        err.print(f"⏳ {escape(result.note or '')}")
        return
    err.print(
        f"❌ {target} {result.status or 'failed'}: {escape(redact(result.failure_reason or ''))}"
    )
    err.print(f"   the container log stays readable: sagemeter sagemaker logs {target}")
    if result.note:
        err.print(f"   {escape(result.note)}")


# --------------------------------------------------------------------------- status / list


def _age(minutes: float | None) -> str:
    if minutes is None:
        return "?"
    return f"{minutes:.0f} min" if minutes < 120 else f"{minutes / 60:.1f} h"


def _info_table(infos: list[sm.EndpointInfo], title: str) -> Table:
    table = Table(title=title)
    for column in ("endpoint", "status", "instances", "age", "$/h", "cost so far", "note"):
        justify: Literal["left", "right"] = (
            "right" if column in {"age", "$/h", "cost so far"} else "left"
        )
        table.add_column(column, justify=justify, overflow="fold")
    for info in infos:
        notes = []
        if info.orphan:
            notes.append("ORPHAN (not in this machine's record)")
        elif info.note:
            notes.append(info.note)
        if info.failure_reason:
            notes.append(f"reason: {info.failure_reason}")
        if info.hourly_usd is None and info.price_note:
            notes.append(f"no price: {info.price_note}")
        if info.leftovers and info.status is None:
            notes.append("left: " + ", ".join(info.leftovers))
        count = f" x{info.instance_count}" if info.instance_count else ""
        table.add_row(
            f"{info.name}@{info.region}",
            info.status or "not in AWS",
            (" / ".join(info.instance_types) or "?") + count,
            _age(info.age_minutes),
            _money(info.hourly_usd, 4),
            _money(info.cost_so_far_usd),
            escape(redact("; ".join(notes))),
        )
    return table


@guarded
def status_command(
    name: Annotated[str, typer.Argument(help="NAME or NAME@REGION")],
    **options: Any,
) -> None:
    """One endpoint: status, instance type, age and cost so far."""
    given = _read(STATUS, StatusOptions, options)
    aws = _aws()
    endpoint, region = endpoint_region(name, given.region, aws)
    info = sm.endpoint_status(endpoint, region, price_per_hour=given.price_per_hour, aws=aws)
    if given.print_target:
        if info.status is None:
            raise UserError(
                f"no endpoint {endpoint} in {region}, only recorded leftovers "
                "(see `sagemeter sagemaker list`)"
            )
        _out().print(f"{endpoint}@{region}")
        return
    _out().print(_info_table([info], f"{endpoint}@{region}"))


@guarded
def list_command(**options: Any) -> None:
    """sagemeter's endpoints (tagged or recorded), with cost so far; orphans are marked."""
    given = _read(LIST, ListOptions, options)
    all_endpoints = given.all_endpoints
    inventory = sm.list_endpoints(
        given.regions or None,
        price_per_hour=given.price_per_hour,
        all_endpoints=all_endpoints,
        aws=_aws(),
    )
    out = _out()
    if inventory.endpoints:
        title = "endpoints" if all_endpoints else "sagemeter endpoints"
        out.print(_info_table(inventory.endpoints, title))
        out.print("\n".join(sm.billing_lines(inventory)))
    else:
        kind = "" if all_endpoints else "sagemeter "
        out.print(f"no {kind}endpoints in {', '.join(inventory.regions)}")
    for where, why in inventory.region_errors.items():
        _err().print(f"warning: {where}: {escape(redact(why))}")


# --------------------------------------------------------------------------- logs


@guarded
def logs_command(
    name: Annotated[str, typer.Argument(help="NAME or NAME@REGION")],
    poll_seconds: Annotated[float, typer.Option(hidden=True)] = 2.0,
    follow_seconds: Annotated[float | None, typer.Option(hidden=True)] = None,
    **options: Any,
) -> None:
    """The endpoint's CloudWatch log (/aws/sagemaker/Endpoints/NAME); no group yet = no logs yet."""
    given = _read(LOGS, LogsOptions, options)
    aws = _aws()
    aws.require_credentials()
    endpoint, region = endpoint_region(name, given.region, aws)
    out = _out()
    result = sm.recent_logs(endpoint, region, limit=given.lines, aws=aws)
    if not result.exists:
        elsewhere = sm.placed_elsewhere(endpoint, region)
        _err().print(
            f"no logs yet for {endpoint} in {region} "
            + (
                f"({elsewhere})"
                if elsewhere
                else f"({result.group} appears once the container starts)"
            )
        )
    elif result.note:
        _err().print(escape(result.note))
    for line in result.lines:
        out.print(_log_text(line))
    if not given.follow:
        return
    began = time.monotonic()
    # The tail ends at the newest line there was: follow from the next millisecond on.
    since = result.lines[-1].timestamp_ms + 1 if result.lines else None
    try:
        sm.follow_logs(
            endpoint,
            region,
            lambda line: out.print(_log_text(line)),
            since_ms=since,
            poll_s=poll_seconds,
            should_stop=lambda: (
                follow_seconds is not None and time.monotonic() - began > follow_seconds
            ),
            aws=aws,
        )
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


def _log_text(line: sm.LogLine) -> Text:
    stamp = time.strftime("%H:%M:%S", time.gmtime(line.timestamp_ms / 1000))
    text = Text(f"{stamp} ", style="dim")
    text.append(redact(line.message))
    return text


# --------------------------------------------------------------------------- invoke


@guarded
def invoke_command(
    target: Annotated[str, typer.Argument(help="NAME@REGION, or NAME where it was placed")],
    prompt: Annotated[str, typer.Argument(help="the user message")],
    **options: Any,
) -> None:
    """Send one chat message through the SageMaker runtime and print the reply."""
    given = _read(INVOKE, InvokeOptions, options)
    stream = given.stream
    name, region = endpoint_region(target, None)
    out = _out()

    # Pieces are shown redacted as a whole: a secret split across pieces is in none of them.
    shown = StreamRedaction(lambda text: out.print(text, end="", markup=False))
    record = sm.invoke(
        name,
        region,
        prompt,
        max_tokens=given.max_tokens,
        stream=stream,
        temperature=given.temperature,
        on_text=shown.feed if stream else None,
    )
    shown.close()
    if not record.ok:
        elsewhere = sm.placed_elsewhere(name, region)
        hint = f" ({elsewhere})" if elsewhere else ""
        raise UserError(f"{name}@{region} did not answer: {record.error}{hint}")
    if stream:
        out.print()
    else:
        out.print(record.text, markup=False)
    tokens = f"{record.usage_tokens} tokens" if record.usage_tokens is not None else "tokens ?"
    first = (
        f", first token {record.first_token_s:.2f} s" if record.first_token_s is not None else ""
    )
    _err().print(
        f"[dim]{tokens} in {record.total_s:.2f} s{first}, finish: {record.finish_reason}[/]"
    )


# --------------------------------------------------------------------------- delete


def _print_delete(report: sm.DeleteReport, console: Console) -> None:
    console.print(f"🗑️ `{report.name}` in `{report.region}`")
    if report.error:
        console.print(f"  - [red]error:[/] {escape(redact(report.error))}")
    for step in report.steps:
        console.print(f"  - {step.kind}: {step.outcome} ({step.name})")


@guarded
def delete_command(
    name: Annotated[str | None, typer.Argument(help="NAME or NAME@REGION")] = None,
    region: Annotated[
        list[str] | None, typer.Option("--region", "-r", help="with --all-mine: where")
    ] = None,
    all_mine: Annotated[
        bool, typer.Option(help="every endpoint sagemeter recorded or tagged")
    ] = False,
    no_wait: Annotated[
        bool, typer.Option(help="do not wait out an endpoint still Creating")
    ] = False,
    poll_seconds: Annotated[float, typer.Option(hidden=True)] = DEFAULT_POLL_S,
) -> None:
    """Delete endpoint, endpoint config and model; only what is tagged as sagemeter's."""
    if (name is None) == (not all_mine):
        raise UserError("give NAME[@REGION], or --all-mine (not both)")
    aws = _aws()
    out, err = _out(), _err()
    progress = ProgressLine(err)
    failed = False
    try:
        with progress:
            if all_mine:
                reports = sm.delete_all_mine(
                    region or None,
                    no_wait=no_wait,
                    on_progress=progress,
                    poll_s=poll_seconds,
                    aws=aws,
                )
            else:
                assert name is not None
                if region and len(region) > 1:
                    raise UserError("give one --region for one endpoint")
                endpoint, where = endpoint_region(name, region[0] if region else None, aws)
                reports = [
                    sm.delete(
                        endpoint,
                        where,
                        no_wait=no_wait,
                        on_progress=progress,
                        poll_s=poll_seconds,
                        aws=aws,
                    )
                ]
    except KeyboardInterrupt:
        latest = progress.latest
        what = f"{latest.name}@{latest.region}" if latest else (name or "the endpoints")
        err.print(
            f"interrupted: {what} is not (fully) deleted; it stays recorded: run "
            f"`sagemeter sagemaker delete {what}` again (`sagemeter sagemaker list` shows what "
            "remains)"
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if not reports:
        out.print("nothing of sagemeter's to delete")
    for report in reports:
        _print_delete(report, out)
        failed = failed or report.error is not None
    if failed:
        raise typer.Exit(EXIT_FAILED)


# --------------------------------------------------------------------------- role

role_app = typer.Typer(help="The IAM execution role SageMaker assumes for the endpoints.")


@role_app.command("create")
@guarded
def role_create_command(
    name: Annotated[str, typer.Argument(help="role name, e.g. sagemeter-endpoint")],
    wait_seconds: Annotated[float, typer.Option(help="how long to wait for IAM")] = 120.0,
    poll_seconds: Annotated[float, typer.Option(hidden=True)] = 2.0,
) -> None:
    """Create the execution role: ECR image pull, container log and metrics, nothing else."""
    err = _err()
    result = sm.create_role(
        name,
        wait_s=wait_seconds,
        poll_s=poll_seconds,
        on_wait=lambda elapsed: err.print(
            f"⏳ waiting for IAM to show role {name} ({elapsed:.0f} s)"
        ),
        aws=_aws(),
    )
    made = "created" if result.created else "exists (sagemeter's); its policy was rewritten"
    err.print(
        f"role {result.name} {made}, visible in IAM after {result.visible_after_s:.1f} s "
        "(what it grants: docs/sagemaker.md#iam)"
    )
    _out().print(f"export {ROLE_ENV}={result.arn}")


@role_app.command("delete")
@guarded
def role_delete_command(name: Annotated[str, typer.Argument(help="role name")]) -> None:
    """Delete a role `role create` made (only one tagged as sagemeter's)."""
    for step in sm.delete_role(name, aws=_aws()).steps:
        _out().print(f"  - {step}")


# --------------------------------------------------------------------------- register

# Each verb's options made from its options model (`sagemeter.options.sagemaker`); delete
# shares none with its MCP tool (its `--region` is repeatable, its `--no-wait` MCP's `wait`).
COMMANDS: dict[str, Callable[..., Any]] = {
    "quota": with_options(QUOTA, "cli")(quota_command),
    "price": with_options(PRICE, "cli")(price_command),
    "deploy": with_options(DEPLOY, "cli")(deploy_command),
    "status": with_options(STATUS, "cli")(status_command),
    "list": with_options(LIST, "cli")(list_command),
    "logs": with_options(LOGS, "cli")(logs_command),
    "invoke": with_options(INVOKE, "cli")(invoke_command),
    "delete": delete_command,
}


def register(app: typer.Typer) -> None:
    """Add `sagemeter sagemaker quota|price|deploy|status|list|logs|invoke|delete|recommend|role`
    (recommend lives in its own module)."""
    group = typer.Typer(
        help="Amazon SageMaker real-time endpoints: quota, price, deploy, status, list, logs, "
        "invoke, delete, recommend (which instance type), and the execution role.",
        no_args_is_help=True,
    )
    from sagemeter.cli.sagemaker_recommend import recommend_command

    for name, command in {**COMMANDS, "recommend": recommend_command}.items():
        group.command(name, help=(command.__doc__ or "").strip())(command)
    group.add_typer(role_app, name="role")
    app.add_typer(group, name="sagemaker")
