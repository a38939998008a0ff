"""The SageMaker verbs' options, declared once: the flags of `sagemeter sagemaker quota`, `price`,
`status`, `list`, `logs`, `invoke` and `deploy`, and the arguments of the MCP tools
`check_quota`, `get_price`, `endpoint_status`, `list_endpoints`, `endpoint_logs`,
`invoke_endpoint` and `deploy_endpoint`, are made from these fields (`sagemeter.options.faces`).

Deploy's endpoint name (the command line's `NAME` argument) and its required `--model`
(`model_id` over MCP) are fields here with no default, required on both faces; its
`max_model_len` and `gpu_memory_utilization` are left to vLLM by None given on purpose (`0` on
the command line and in a plan, null over MCP: `Opt.none`), their default the article's 8192
and 0.9.

Deploy has a third face, a plan's `[arm.sagemaker]` table: the settings it shares (model, where,
the container's settings, count, timeouts, the deadline) are declared once in
`sagemeter.sagemaker.deploy_fields.DeployFields`, below the plan's platform that reads the table,
and taken from there (`taken`); `not_on` "plan" names the options the table leaves out or spells
its own way (the endpoint's name, `env` as a table, the fallbacks as lists).

Each face keeps its own:
- what the other verbs' command lines take as positional arguments (the instance type, the
  endpoint, the prompt);
- deploy's container environment (the command line's `--env KEY=VALUE` flags, MCP's object):
  the command line's is a field here, not on MCP; the tool declares its own;
- the command line's test hooks (hidden `--poll-seconds`, `--follow-seconds`);
- `delete`: `--region` is repeatable with `--all-mine` on the command line, one region over MCP,
  and `--no-wait` is MCP's `wait` turned round, so the two faces share no option.
Options only the command line has (how it prints, deploy's container timeouts) are fields here
with `not_on` saying why.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field

from sagemeter.bounds import MAX_PRICE_PER_HOUR, MAX_TOKENS
from sagemeter.limits import check_price
from sagemeter.options.base import Face, Opt, OptionsModel, taken
from sagemeter.options.checked import Checked
from sagemeter.options.command import Command
from sagemeter.sagemaker.deploy_fields import DeployFields

MAX_LOG_LINES = 1000  # recent lines of one read (CloudWatch's GetLogEvents gives 10,000 at most)

_PRINTS: tuple[tuple[Face, str], ...] = (("mcp", "how the command line prints its answer"),)


def _region(help: str = "AWS region such as us-east-2") -> Any:
    return Field(None, description=help)


Region = Annotated[str | None, Opt(short="-r")]
PricePerHour = Annotated[
    float | None,
    Field(gt=0, le=MAX_PRICE_PER_HOUR),
    Checked(check_price),
    Opt(),
]
PRICE_HELP = "USD per instance-hour to use instead of the AWS Price List"


class QuotaOptions(OptionsModel):
    """Where `quota` looks."""

    TABLE: ClassVar[str] = "quota"  # no plan table: the name its messages use

    regions: Annotated[
        list[str] | None,
        Field(
            description="AWS regions to look in; default: the configured region, us-east-1, "
            "us-east-2, us-west-2"
        ),
        Opt(cli="--region", short="-r"),
    ] = None


class PriceOptions(OptionsModel):
    """Where the price is looked up, and whether the cache is skipped."""

    TABLE: ClassVar[str] = "price"  # no plan table: the name its messages use

    region: Region = _region()
    refresh: Annotated[
        bool, Field(description="ask the AWS Price List again instead of the cache"), Opt()
    ] = False
    price_per_hour: Annotated[
        float | None,
        Field(gt=0, le=MAX_PRICE_PER_HOUR, description="use this USD/hour instead"),
        Checked(check_price),
        Opt(not_on=(("mcp", "get_price looks the price up; one given would only be echoed"),)),
    ] = None


class StatusOptions(OptionsModel):
    """Where the endpoint is, and the price its cost so far is made with."""

    TABLE: ClassVar[str] = "status"  # no plan table: the name its messages use

    region: Region = _region()
    price_per_hour: PricePerHour = Field(None, description=PRICE_HELP)
    print_target: Annotated[
        bool,
        Field(description="print only NAME@REGION where it is (for scripts)"),
        Opt(not_on=_PRINTS),
    ] = False


class ListOptions(OptionsModel):
    """Where `list` looks, which endpoints it shows, and the price of their cost so far."""

    TABLE: ClassVar[str] = "list"  # no plan table: the name its messages use

    regions: Annotated[
        list[str] | None,
        Field(description="AWS regions to look in; default: recorded, configured and the usual"),
        Opt(cli="--region", short="-r"),
    ] = None
    price_per_hour: PricePerHour = Field(None, description=PRICE_HELP)
    all_endpoints: Annotated[
        bool,
        Field(description="every endpoint in the regions, not only sagemeter's"),
        Opt(cli="--all"),  # a flag that only turns it on, as it always was
    ] = False


class LogsOptions(OptionsModel):
    """Where the endpoint is, and how much of its log is read."""

    TABLE: ClassVar[str] = "logs"  # no plan table: the name its messages use

    region: Region = _region()
    follow: Annotated[
        bool,
        Field(description="keep printing new lines"),
        Opt(
            cli="--follow",
            short="-f",
            not_on=(("mcp", "a tool answers once; it reads the recent lines"),),
        ),
    ] = False
    lines: Annotated[
        int, Field(ge=1, le=MAX_LOG_LINES, description="how many recent lines"), Opt()
    ] = 50


class InvokeOptions(OptionsModel):
    """How long the reply may be and how it is sampled."""

    TABLE: ClassVar[str] = "invoke"  # no plan table: the name its messages use

    max_tokens: Annotated[
        int, Field(ge=1, le=MAX_TOKENS, description="reply length cap"), Opt()
    ] = 256
    stream: Annotated[
        bool,
        Field(description="print tokens as they arrive"),
        Opt(not_on=(("mcp", "a tool answers once, with the whole reply"),)),
    ] = False
    temperature: Annotated[float, Field(ge=0, le=2, description="sampling temperature"), Opt()] = (
        0.0
    )


_VLLMS_OWN = "leaves it to vLLM"
_CLI_DEPLOY: tuple[tuple[Face, str], ...] = (
    ("mcp", "deploy_endpoint keeps the container's and SageMaker's own"),
)
_PLAN_NAMES: tuple[tuple[Face, str], ...] = (
    ("plan", "the plan's endpoint, PLAN-ARM unless given"),
)
_PLAN_LIST: tuple[tuple[Face, str], ...] = (("plan", "a list in the plan, [] for none"),)


class DeployOptions(OptionsModel):
    """What is deployed where, and how long deploy waits for it. The settings a plan's
    `[arm.sagemaker]` holds too are taken from `DeployFields` (declared once there, below the
    plan's platform); `not_on` "plan" says what the plan table leaves out or spells its own way."""

    TABLE: ClassVar[str] = "deploy"  # no plan table of its own: the name its messages use

    name: Annotated[
        str,
        Field(description="the endpoint name (1-63 letters, digits, hyphens)"),
        Opt(positional=True, not_on=_PLAN_NAMES),
    ]
    model: str = taken(DeployFields, "model", mcp="model_id", short="-m")
    instance_type: str = taken(DeployFields, "instance_type")
    region: str | None = taken(DeployFields, "region", short="-r")
    fallback_regions: Annotated[
        list[str] | None,
        Field(description="regions tried in order after a capacity failure"),
        Opt(cli="--fallback-region", not_on=_PLAN_LIST),
    ] = None
    fallback_instance_types: Annotated[
        list[str] | None,
        Field(description="InstancePools after the main type, in priority order"),
        Opt(cli="--fallback-instance-type", not_on=_PLAN_LIST),
    ] = None
    env: Annotated[
        list[str] | None,
        Field(description="KEY=VALUE for the container, repeatable"),
        Opt(
            not_on=(
                ("mcp", "deploy_endpoint takes the environment as one object"),
                ("plan", "the plan's env is a table of the container's variables"),
            )
        ),
    ] = None
    role_arn: str | None = taken(DeployFields, "role_arn", cli="--role")
    image: str | None = taken(DeployFields, "image")
    image_tag: str | None = taken(DeployFields, "image_tag")
    max_model_len: int | None = taken(DeployFields, "max_model_len", none=_VLLMS_OWN, cli_none=0)
    gpu_memory_utilization: float | None = taken(
        DeployFields, "gpu_memory_utilization", none=_VLLMS_OWN, cli_none=0
    )
    count: int = taken(DeployFields, "count")
    inference_ami: str | None = taken(DeployFields, "inference_ami", not_on=_CLI_DEPLOY)
    startup_timeout: int = taken(DeployFields, "startup_timeout", not_on=_CLI_DEPLOY)
    download_timeout: int = taken(DeployFields, "download_timeout", not_on=_CLI_DEPLOY)
    provision_timeout: int | None = taken(DeployFields, "provision_timeout", not_on=_CLI_DEPLOY)
    deadline_minutes: float = taken(DeployFields, "deadline_minutes", mcp="wait_minutes")
    price_per_hour: float | None = taken(
        StatusOptions,
        "price_per_hour",
        not_on=(("plan", "a plan's price_per_hour is the whole plan's, at its top"),),
    )
    dry_run: Annotated[
        bool,
        Field(description="show the create requests only; create nothing"),
        Opt(not_on=(("plan", "`sagemeter run --dry-run` shows the whole plan's"),)),
    ] = False


def _verb(name: str, model: type[OptionsModel]) -> Command:
    # flag_defaults: the flags show and start from their own defaults, as typer showed them;
    # quote_values: a refusal names the value after the flag (`--max-tokens 0: …`), as it did
    return Command(
        name,
        models=(model,),
        flag_defaults=True,
        quote_values=True,
    )


QUOTA = _verb("sagemaker quota", QuotaOptions)
PRICE = _verb("sagemaker price", PriceOptions)
STATUS = _verb("sagemaker status", StatusOptions)
LIST = _verb("sagemaker list", ListOptions)
LOGS = _verb("sagemaker logs", LogsOptions)
INVOKE = _verb("sagemaker invoke", InvokeOptions)
DEPLOY = _verb("sagemaker deploy", DeployOptions)
