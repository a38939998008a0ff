"""`inspect`, `combine`, `run`, `serve` and the SageMaker verbs declare the options their command
line and their MCP tool share once (`sagemeter.options.inspect`, `.combine`, `.run`, `.serve`,
`.sagemaker`): each face's flags and arguments are the model's, with its names, bounds and help,
and a value past a bound is the same sentence on both faces (exit 2 on the command line, a tool
error over MCP). A flag or an argument added to one face by hand, or a bound or a help text
changed in one place, fails here."""

from __future__ import annotations

import json
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import pytest
import typer
from mcp.client import Client
from pydantic import Field, TypeAdapter
from rich.markup import escape
from typer.testing import CliRunner

from sagemeter.errors import UserError, exit_code
from sagemeter.mcp.server import ServerConfig, build_server
from sagemeter.options.base import Opt, Option, OptionsModel, Text
from sagemeter.options.combine import COMBINE
from sagemeter.options.command import Command
from sagemeter.options.inspect import INSPECT
from sagemeter.options.run import RUN
from sagemeter.options.sagemaker import DEPLOY, INVOKE, LIST, LOGS, PRICE, QUOTA, STATUS
from sagemeter.options.serve import SERVE
from tests import cli_run
from tests.mcp_helpers import error_line

if TYPE_CHECKING:
    from tests.sagemaker_fakes import World

BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "type")
SCHEMA_SUFFIX = " (see the tool's input schema)"


@dataclass(frozen=True)
class Faces:
    """One command, its MCP tool, and what each face has beside the model's options."""

    command: Command
    module: str  # the cli module that registers it
    cli: str  # the command's name (`sagemaker quota`: a group's command)
    tool: str
    cli_only: frozenset[str]  # the command line's own parameters (paths, --json, --force)
    mcp_only: frozenset[str]  # the tool's own arguments (names in its results folder)
    cli_args: tuple[str, ...]  # what the command needs beside the option refused
    mcp_args: dict[str, Any]
    # a value past a bound for an option: (option name, text on the command line, JSON value)
    refused: tuple[tuple[str, str, Any], ...]


FACES = (
    Faces(
        INSPECT,
        "inspect",
        "inspect",
        "inspect_checkpoint",
        frozenset({"sources", "json_output"}),
        frozenset({"sources"}),
        ("local:smollm2-q4_1",),
        {"sources": ["local:smollm2-q4_1"]},
        (("bandwidth", "0", 0), ("bandwidth", "2e6", 2e6), ("bandwidth", "-1", -1.0)),
    ),
    Faces(
        COMBINE,
        "combine",
        "combine",
        "compare_results",
        frozenset({"out", "files", "force"}),
        frozenset({"results", "name", "force"}),
        ("{tmp}/c.json", "{tmp}/a.json", "{tmp}/b.json"),
        {"results": ["a", "b"]},
        (
            ("price_per_hour", "1e9", 1e9),
            ("price_per_hour", "0", 0),
            ("margin", "0", 0),
            ("margin", "101", 101),
        ),
    ),
    Faces(
        RUN,
        "run",
        "run",
        "run_experiment",
        frozenset({"plan", "out", "resume", "poll_seconds"}),
        frozenset({"plan", "plan_file", "resume"}),
        ("--resume", "{tmp}/runs/r"),
        {"resume": "r"},
        (("max_cost_usd", "2e6", 2e6), ("max_cost_usd", "0", 0)),
    ),
    Faces(
        SERVE,
        "engine",
        "serve",
        "start_local",
        frozenset({"target", "port"}),  # port: 8080 on the command line, a free one over MCP
        frozenset({"checkpoint", "port"}),
        ("local:smollm2-q4_1",),
        {},
        # past llama.cpp's 256 slots on both faces (the tool allowed 64, the command line 512)
        (("parallel", "0", 0), ("parallel", "257", 257)),
    ),
    # The SageMaker verbs (no bound shared by quota's and price's faces: price's only bounded
    # option, --price-per-hour, is the command line's own)
    Faces(
        QUOTA,
        "sagemaker",
        "sagemaker quota",
        "check_quota",
        frozenset({"instance_type"}),
        frozenset({"instance_type"}),
        ("ml.g6.xlarge",),
        {"instance_type": "ml.g6.xlarge"},
        (),
    ),
    Faces(
        PRICE,
        "sagemaker",
        "sagemaker price",
        "get_price",
        frozenset({"instance_type"}),
        frozenset({"instance_type"}),
        ("ml.g6.xlarge",),
        {"instance_type": "ml.g6.xlarge"},
        (),
    ),
    Faces(
        STATUS,
        "sagemaker",
        "sagemaker status",
        "endpoint_status",
        frozenset({"name"}),
        frozenset({"endpoint"}),
        ("x@us-east-1",),
        {"endpoint": "x@us-east-1"},
        (("price_per_hour", "0", 0), ("price_per_hour", "1e9", 1e9)),
    ),
    Faces(
        LIST,
        "sagemaker",
        "sagemaker list",
        "list_endpoints",
        frozenset(),
        frozenset(),
        (),
        {},
        (("price_per_hour", "1e9", 1e9), ("price_per_hour", "-1", -1.0)),
    ),
    Faces(
        LOGS,
        "sagemaker",
        "sagemaker logs",
        "endpoint_logs",
        frozenset({"name", "poll_seconds", "follow_seconds"}),  # the hidden test hooks
        frozenset({"endpoint"}),
        ("x@us-east-1",),
        {"endpoint": "x@us-east-1"},
        # the command line took any number of lines (0, -5, 10^9), the tool 1-1000
        (("lines", "0", 0), ("lines", "1001", 1001)),
    ),
    Faces(
        INVOKE,
        "sagemaker",
        "sagemaker invoke",
        "invoke_endpoint",
        frozenset({"target", "prompt"}),
        frozenset({"endpoint", "prompt"}),
        ("x@us-east-1", "hi"),
        {"endpoint": "x@us-east-1", "prompt": "hi"},
        # the tool capped a reply at 8,192 tokens, the command line at 1,000,000 (limits' Tokens)
        (("max_tokens", "0", 0), ("max_tokens", "1000001", 1000001), ("temperature", "3", 3)),
    ),
    Faces(
        DEPLOY,
        "sagemaker",
        "sagemaker deploy",
        "deploy_endpoint",
        frozenset({"poll_seconds"}),
        frozenset({"env"}),  # the tool's own environment object
        ("x", "--model", "org/m"),
        {"name": "x", "model_id": "org/m"},
        # the command line took any --count (the tool 1-100); the tool took wait_minutes 0
        (
            ("count", "0", 0),
            ("count", "101", 101),
            ("deadline_minutes", "0", 0),
            ("deadline_minutes", "1441", 1441),
            ("price_per_hour", "0", 0),
        ),
    ),
)
IDS = [faces.cli for faces in FACES]
REFUSING = [faces for faces in FACES if faces.refused]


def _app(module: str) -> typer.Typer:
    import importlib

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.callback()
    def _group() -> None:
        pass

    importlib.import_module(f"sagemeter.cli.{module}").register(app)
    return app


def _cli_params(faces: Faces) -> dict[str, Any]:
    command: Any = typer.main.get_command(_app(faces.module))
    for word in faces.cli.split():
        command = command.commands[word]
    return {str(param.name): param for param in command.params}


def _mcp_schema(tool: str) -> dict[str, Any]:
    async def listed() -> dict[str, Any]:
        server = build_server(ServerConfig(results_dir=Path("/nonexistent/results")))
        async with Client(server) as client:
            tools = {each.name: each for each in (await client.list_tools()).tools}
        schema: dict[str, Any] = tools[tool].input_schema
        return schema

    return anyio.run(listed)


def _mcp_properties(tool: str) -> dict[str, Any]:
    properties: dict[str, Any] = _mcp_schema(tool)["properties"]
    return properties


def _bounds(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema's bounds and type, its `null` branch left out."""
    branches = [branch for branch in schema.get("anyOf", [schema]) if branch.get("type") != "null"]
    assert len(branches) == 1, schema
    return {key: branches[0][key] for key in BOUNDS if key in branches[0]}


def _own_bounds(option: Option) -> dict[str, Any]:
    kind = operator.getitem(Annotated, (option.info.annotation, *option.info.metadata))
    return _bounds(TypeAdapter(kind).json_schema())


@pytest.mark.parametrize("faces", FACES, ids=IDS)
def test_the_command_line_has_exactly_the_models_options(faces: Faces) -> None:
    params = _cli_params(faces)
    options = list(faces.command.options())
    shown = {option.name for option in options if option.on("cli")}
    assert set(params) - {"help"} == shown | faces.cli_only  # nothing added by hand
    for option in options:
        param = params[option.name]
        short = [option.opt.short] if option.opt.short else []
        if option.opt.positional:  # an argument: `NAME` in the usage, no flag
            assert param.param_type_name == "argument", option.name
            assert param.opts == [option.name], option.name
            assert option.spelled("cli") == option.name.upper()  # as typer's usage names it
        else:
            assert param.param_type_name == "option", option.name
            assert param.opts == [option.spelled("cli"), *short], option.name
        assert param.help == escape(faces.command.help(option, "cli")), option.name
        assert param.required is option.required, option.name
        assert param.default == (None if option.required else option.info.default), option.name
        if option.info.annotation is bool and option.opt.cli:
            assert param.secondary_opts == [], option.name  # a flag that only turns it on


@pytest.mark.parametrize("faces", FACES, ids=IDS)
def test_the_mcp_tool_has_exactly_the_models_options(faces: Faces) -> None:
    schema = _mcp_schema(faces.tool)
    properties, required = schema["properties"], set(schema.get("required", []))
    options = [option for option in faces.command.options() if option.on("mcp")]
    assert set(properties) == {option.spelled("mcp") for option in options} | faces.mcp_only
    for option in options:
        prop = properties[option.spelled("mcp")]
        assert _bounds(prop) == _own_bounds(option), option.name
        assert (option.spelled("mcp") in required) is option.required, option.name
        if option.required:
            assert "default" not in prop, option.name
        else:
            assert prop.get("default") == option.info.default, option.name
        assert prop["description"] == faces.command.help(option, "mcp"), option.name


def test_each_face_names_the_others_options_as_it_spells_them() -> None:
    """`{gpu}` and `{resume}` in a help text are each face's spelling: `resume` is no option of
    the model (a path on the command line, a folder's name over MCP) but its help names it."""
    bandwidth, cap = INSPECT.option("bandwidth"), RUN.option("max_cost_usd")
    assert INSPECT.help(bandwidth, "cli").endswith("instead of --gpu [0<x<=1000000]")
    assert INSPECT.help(bandwidth, "mcp").endswith("instead of gpu")
    assert RUN.help(cap, "cli").startswith("with --resume: ")
    assert RUN.help(cap, "mcp").startswith("with resume: ")
    margin = COMBINE.option("margin")
    assert COMBINE.help(margin, "cli").endswith(
        "[the one the first result declared, else 2] [0<x<=100]"
    )
    assert COMBINE.help(margin, "mcp").endswith(
        "(default: the one the first result declared, else 2)"
    )


def _after_flag(faces: Faces, message: str, flag: str) -> str:
    """What the refusal says after the flag (and, for a command that names it, the value)."""
    said, sep, rest = message.partition(": ")
    quoted = faces.command.quote_values and said.startswith(f"{flag} ")
    assert sep and (said == flag or quoted), message
    return rest


def _cli_refusal(faces: Faces, flag: str, text: str, tmp: Path) -> str:
    args = [arg.replace("{tmp}", str(tmp)) for arg in faces.cli_args]
    done = CliRunner().invoke(_app(faces.module), [*faces.cli.split(), *args, flag, text])
    if isinstance(done.exception, UserError):
        assert exit_code(done.exception) == 2
        message = str(done.exception)
    else:  # a command that prints its own error line (the SageMaker verbs)
        lines = [line for line in done.output.splitlines() if line.strip()]
        assert done.exit_code == 2 and len(lines) == 1, done.output
        assert lines[0].startswith("error: "), done.output
        message = lines[0].removeprefix("error: ")
    return _after_flag(faces, message, flag)


def _mcp_refusals(faces: Faces, tmp: Path) -> list[str]:
    async def refused() -> list[str]:
        server = build_server(ServerConfig(results_dir=tmp / "results"))
        lines = []
        async with Client(server) as client:
            for name, _, value in faces.refused:
                argument = faces.command.option(name).spelled("mcp")
                answer = await client.call_tool(faces.tool, {**faces.mcp_args, argument: value})
                line = error_line(answer)
                prefix = f"{faces.tool}: {argument}: "
                assert line.startswith(prefix) and line.endswith(SCHEMA_SUFFIX), line
                lines.append(line.removeprefix(prefix).removesuffix(SCHEMA_SUFFIX))
        return lines

    return anyio.run(refused)


@pytest.mark.parametrize("faces", REFUSING, ids=[faces.cli for faces in REFUSING])
def test_a_value_past_a_bound_is_the_same_sentence_on_both_faces(
    faces: Faces, tmp_path: Path
) -> None:
    """Before any work: no file is read or written (OUT, the results folder)."""
    said_mcp = _mcp_refusals(faces, tmp_path)
    for (name, text, _), mcp in zip(faces.refused, said_mcp, strict=True):
        flag = faces.command.option(name).spelled("cli")
        cli = _cli_refusal(faces, flag, text, tmp_path)
        assert cli == mcp, (name, text)
        assert "Value error" not in cli and "\n" not in cli
    assert not list(tmp_path.rglob("*.json"))


def test_the_domain_checks_say_the_same_on_both_faces(tmp_path: Path) -> None:
    """A price and a bandwidth are refused in the library's own words (`check_price`,
    `check_bandwidth`), not pydantic's, on both faces."""
    said = dict(
        zip(
            ["bandwidth 0", "bandwidth 2e6", "bandwidth -1"],
            _mcp_refusals(FACES[0], tmp_path),
            strict=True,
        )
    )
    assert said["bandwidth 0"] == said["bandwidth -1"] == "give a positive number of GB/s"
    assert said["bandwidth 2e6"] == "Input should be less than or equal to 1000000"
    price = _mcp_refusals(FACES[1], tmp_path)[:2]
    assert price == ["give a positive number of USD up to 10,000, e.g. 1.1267"] * 2


@pytest.mark.parametrize("faces", REFUSING, ids=[faces.cli for faces in REFUSING])
def test_the_command_exits_2_with_one_line(faces: Faces, tmp_path: Path) -> None:
    """The installed command: one line naming the flag on stderr, exit 2."""
    name, text, _ = faces.refused[0]
    flag = faces.command.option(name).spelled("cli")
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in faces.cli_args]
    done = cli_run.invoke([*faces.cli.split(), *args, flag, text])
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert _after_flag(faces, lines[0].removeprefix("error: "), flag), done.stderr
    assert done.stdout == ""


DEPLOYED = {"region": "us-east-2", "dry_run": True}


@pytest.mark.parametrize(
    ("cli_args", "mcp_args", "cli_said", "mcp_said"),
    [
        (["--model", "org/m"], {"model_id": "org/m"}, "Missing argument 'name'", "name"),
        (["gemma-4-e2b"], {"name": "gemma-4-e2b"}, "Missing option '--model'", "model_id"),
    ],
    ids=["no name", "no model"],
)
def test_deploy_refuses_a_missing_name_or_model_on_both_faces_before_aws(
    world: World,
    tmp_path: Path,
    cli_args: list[str],
    mcp_args: dict[str, Any],
    cli_said: str,
    mcp_said: str,
) -> None:
    """The command line: one line, exit 2; the tool (allowed to write): one error line
    naming the argument. Neither reaches AWS (no call, no price or quota read, no record)."""
    done = cli_run.invoke(["sagemaker", "deploy", *cli_args])
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stdout == "", done.stderr
    assert done.stderr.startswith(f"error: {cli_said}"), done.stderr
    assert "sagemaker deploy --help" in done.stderr

    async def refused() -> str:
        config = ServerConfig(results_dir=tmp_path / "results", allow_write=True)
        async with Client(build_server(config)) as client:
            return error_line(await client.call_tool("deploy_endpoint", mcp_args))

    said = anyio.run(refused)
    assert said == f"deploy_endpoint: {mcp_said}: Field required{SCHEMA_SUFFIX}"
    assert world.moto.calls == [] and world.json_fake.requests == []
    assert world.ledger_files() == []


def _container_env(tmp_path: Path, cli: list[str], mcp: dict[str, Any]) -> list[dict[str, str]]:
    """The container environment deploy's dry run would send, from the command line and from
    the tool, given the same options."""
    from sagemeter.cli.sagemaker import register

    app = typer.Typer()
    register(app)
    args = ["sagemaker", "deploy", "x", "--model", "org/m", "--region", "us-east-2", "--dry-run"]
    done = CliRunner().invoke(app, [*args, *cli])
    assert done.exit_code == 0, done.output

    async def planned() -> Any:
        config = ServerConfig(results_dir=tmp_path / "results")
        async with Client(build_server(config)) as client:
            answer = await client.call_tool(
                "deploy_endpoint", {"name": "x", "model_id": "org/m", **DEPLOYED, **mcp}
            )
        assert not answer.is_error, answer
        assert answer.structured_content is not None
        return answer.structured_content["plans"]

    return [
        plan["requests"]["CreateModel"]["PrimaryContainer"]["Environment"]
        for plan in (json.loads(done.stdout)[0], anyio.run(planned)[0])
    ]


def test_deploy_leaves_the_context_and_memory_to_vllm_alike_on_both_faces(
    world: World, tmp_path: Path
) -> None:
    """One declaration: unset is the article's 8192 and 0.9 on both faces; `0` on the command
    line and null over MCP both leave the two to vLLM (neither variable is sent); a value given
    is sent as given."""
    keys = ("SM_VLLM_MAX_MODEL_LEN", "SM_VLLM_GPU_MEMORY_UTILIZATION")

    def sent(cli: list[str], mcp: dict[str, Any]) -> list[dict[str, str]]:
        return [
            {key: env[key] for key in keys if key in env}
            for env in _container_env(tmp_path, cli, mcp)
        ]

    unset = sent([], {})
    assert unset == [dict(zip(keys, ("8192", "0.9"), strict=True))] * 2
    own = sent(
        ["--max-model-len", "0", "--gpu-memory-utilization", "0"],
        {"max_model_len": None, "gpu_memory_utilization": None},
    )
    assert own == [{}, {}]
    given = sent(
        ["--max-model-len", "4096", "--gpu-memory-utilization", "0.8"],
        {"max_model_len": 4096, "gpu_memory_utilization": 0.8},
    )
    assert given == [dict(zip(keys, ("4096", "0.8"), strict=True))] * 2
    assert world.moto.calls == []


@pytest.mark.parametrize("faces", FACES, ids=IDS)
def test_the_command_line_shows_each_bounded_options_range(faces: Faces) -> None:
    """Every option whose model holds a bound shows it in `--help`, as typer writes its own min
    and max (`[1<=x<=100]`); the MCP schema carries the same bounds as numbers."""
    params = _cli_params(faces)
    for option in faces.command.options():
        if not option.on("cli"):
            continue
        bounded = set(_own_bounds(option)) - {"type"}
        shown = option.range_text()
        assert bool(shown) is bool(bounded), (option.name, shown)
        if shown:
            assert str(params[option.name].help).endswith(f"[{shown}]"), option.name


def test_a_range_is_written_as_typer_writes_its_own() -> None:
    """An integer's strict bound as the inclusive one (`gt=0` is `1<=`), a float's kept strict,
    a lower bound alone as `x>=`, a duration's with its unit, a 64-bit integer's limits none."""
    said = {
        (faces.command.name, option.name): option.range_text()
        for faces in FACES
        for option in faces.command.options()
    }
    assert said["sagemaker deploy", "count"] == "1<=x<=100"
    assert said["sagemaker deploy", "gpu_memory_utilization"] == "0<x<=1"
    assert said["sagemaker deploy", "max_model_len"] == "1<=x<=10000000"
    assert said["sagemaker invoke", "temperature"] == "0<=x<=2"
    assert said["serve", "parallel"] == "1<=x<=256"
    assert said["sagemaker deploy", "instance_type"] == ""

    class Toy(OptionsModel):
        low: Annotated[int | None, Field(gt=0), Opt()] = None
        wait: Annotated[
            float | None, Field(gt=0, le=60), Text(lambda text, label: float(text), unit="s"), Opt()
        ] = None
        seed: Annotated[int | None, Field(ge=-(2**63), le=2**63 - 1), Opt()] = None

    toy = {option.name: option.range_text() for option in Toy.options()}
    assert toy == {"low": "x>=1", "wait": "0<x<=60s", "seed": ""}


# Deploy's third face: a plan's [arm.sagemaker] table, which SageMaker's platform reads, takes
# the options it shares from DeployFields (below the platform), as DeployOptions does.
PLAN_OWN = {"fallback_regions", "fallback_instance_types", "env", "endpoint", "predicted_decode"}
ARM = 'name = "p"\n[[arm]]\nname = "a"\ntarget = "http://127.0.0.1:1"\n[[arm]]\nname = "c"\n'


def _plan_key(name: str) -> str:
    """The key a plan writes for the options model's field `name` (`role` for `role_arn`)."""
    from sagemeter.sagemaker.plan_table import SageMakerArm

    return SageMakerArm.model_fields[name].alias or name


def _plan_line(table: str) -> str:
    """The one line a plan with this `[arm.sagemaker]` table is refused with, after its key."""
    from sagemeter.experiment.plan import PlanProblems, parse_plan

    with pytest.raises(PlanProblems) as caught:
        parse_plan(f'{ARM}[arm.sagemaker]\nmodel = "org/m"\n{table}\n', "plan.toml")
    problems = caught.value.problems
    assert len(problems) == 1 and "\n" not in problems[0], problems
    return problems[0]


def test_deploys_plan_table_has_exactly_the_models_options() -> None:
    """Every option of `sagemaker deploy` is a key of `[arm.sagemaker]` with its type, bounds,
    default and help, or says why the plan leaves it out (`not_on`); the table's other keys are
    the plan's own. A bound or a default changed on one face alone, or an option added to one
    by hand, fails here."""
    from sagemeter.sagemaker.deploy_fields import VLLMS_OWN, DeployFields
    from sagemeter.sagemaker.plan_table import SageMakerArm

    options = list(DEPLOY.options())
    on_plan = [option for option in options if option.on("plan")]
    assert {option.name for option in on_plan} == set(DeployFields.model_fields)
    assert set(SageMakerArm.model_fields) == set(DeployFields.model_fields) | PLAN_OWN
    left_out = {
        option.name: dict(option.opt.not_on)["plan"] for option in options if not option.on("plan")
    }
    plan_spells_its_own = {"name", "fallback_regions", "fallback_instance_types", "env"}
    assert set(left_out) == plan_spells_its_own | {"price_per_hour", "dry_run"}
    assert all(reason.strip() for reason in left_out.values())
    for option in on_plan:
        field = SageMakerArm.model_fields[option.name]
        assert field.annotation == option.info.annotation, option.name
        bounds = [item for item in option.info.metadata if not isinstance(item, Opt)]
        assert field.metadata == bounds, option.name
        assert field.default == option.info.default, option.name
        assert field.is_required() is option.required, option.name
        assert field.description == option.help, option.name
        assert _bounds(SageMakerArm.model_json_schema()["properties"][_plan_key(option.name)]) == (
            _own_bounds(option)
        ), option.name
    # the command line's spelling of "leave it to vLLM" (0) is the plan's, as TOML has no null
    assert set(VLLMS_OWN) == {option.name for option in on_plan if option.opt.cli_none == 0}
    # only the role is written otherwise, as the command line's flag names it
    renamed = {option.name: _plan_key(option.name) for option in on_plan}
    assert {name: key for name, key in renamed.items() if name != key} == {"role_arn": "role"}
    assert DEPLOY.option("role_arn").spelled("cli") == "--role"


# a value past a bound: (option, the command line's text, the plan's TOML value)
PLAN_REFUSED = (
    ("count", "0", "0"),
    ("count", "101", "101"),
    ("deadline_minutes", "0", "0"),
    ("deadline_minutes", "1441", "1441"),
    ("max_model_len", "20000000", "20_000_000"),
    ("gpu_memory_utilization", "1.5", "1.5"),
    ("startup_timeout", "10", "10"),
    ("download_timeout", "4000", "4000"),
    ("provision_timeout", "60", "60"),
)


@pytest.mark.parametrize(("name", "text", "value"), PLAN_REFUSED, ids=lambda v: str(v))
def test_a_value_past_a_bound_is_the_same_sentence_in_a_plan(
    name: str, text: str, value: str, tmp_path: Path
) -> None:
    """The plan's line names its key (`arm "c".sagemaker.count`) and says what the command
    line says after its flag, before any work."""
    deploy = next(faces for faces in FACES if faces.command is DEPLOY)
    line = _plan_line(f"{_plan_key(name)} = {value}")
    key = f'arm "c".sagemaker.{_plan_key(name)}: '
    assert line.startswith(key), line
    cli = _cli_refusal(deploy, DEPLOY.option(name).spelled("cli"), text, tmp_path)
    assert line.removeprefix(key) == cli


def test_a_plan_keeps_its_keys_and_leaves_the_context_and_memory_to_vllm_with_0() -> None:
    """A plan written before reads as before: every key it may write is kept as written (`role`,
    not `role_arn`, which is an unknown key), 0 leaves the context and the memory share to vLLM
    (neither variable sent, as `--max-model-len 0` on the command line), and the plan is written
    back with its 0s, so its TOML reads the same again. Unset, the two are deploy's defaults."""
    from sagemeter.experiment.plan import parse_plan
    from sagemeter.experiment.plan_toml import plan_toml
    from sagemeter.sagemaker import Aws
    from sagemeter.sagemaker.plan_arms import deploy_spec
    from sagemeter.sagemaker.spec import container_environment

    table = {
        "model": "org/m",
        "instance_type": "ml.g6.2xlarge",
        "region": "us-east-2",
        "fallback_regions": ["us-east-1"],
        "fallback_instance_types": ["ml.g6.xlarge"],
        "env": {"SM_VLLM_MAX_NUM_SEQS": "8"},
        "endpoint": "c-endpoint",
        "role": "arn:aws:iam::123456789012:role/SageMaker",
        "image_tag": "0.9.2",
        "max_model_len": 0,
        "gpu_memory_utilization": 0.0,
        "count": 2,
        "inference_ami": "al2-ami-sagemaker-inference-gpu-3-1",
        "startup_timeout": 600,
        "download_timeout": 900,
        "provision_timeout": 1200,
        "deadline_minutes": 30.0,
    }
    plan = parse_plan(
        plan_toml(
            {
                "name": "p",
                "arm": [
                    {"name": "a", "target": "http://127.0.0.1:1"},
                    {"name": "c", "sagemaker": table},
                ],
            }
        )
    )
    written = plan.to_data()["arm"][1]["sagemaker"]
    assert written == table and list(written) != []
    assert parse_plan(plan_toml(plan.to_data())).to_data() == plan.to_data()
    arm = plan.arm_named("c")
    spec = deploy_spec(plan, arm, Aws())
    assert (spec.max_model_len, spec.gpu_memory_utilization) == (None, None)
    env = container_environment(spec, hf_token=None)
    assert "SM_VLLM_MAX_MODEL_LEN" not in env and "SM_VLLM_GPU_MEMORY_UTILIZATION" not in env
    assert (spec.name, spec.role_arn, spec.count) == ("c-endpoint", table["role"], 2)

    unset = parse_plan(f'{ARM}[arm.sagemaker]\nmodel = "org/m"\n').arm_named("c").table
    assert (
        (unset.max_model_len, unset.gpu_memory_utilization)
        == (
            DEPLOY.option("max_model_len").info.default,
            DEPLOY.option("gpu_memory_utilization").info.default,
        )
        == (8192, 0.9)
    )
    assert _plan_line('role_arn = "x"') == 'arm "c".sagemaker.role_arn: unknown key'
    # below 0 is refused with the plan's lowest value, as it always was (the command line's is 1)
    for key in ("max_model_len", "gpu_memory_utilization"):
        line = _plan_line(f"{key} = -1")
        assert line == f'arm "c".sagemaker.{key}: Input should be greater than or equal to 0'
