"""`inspect`, `combine`, `run`, `serve` and the SageMaker verbs declare the options their command
line and their MCP tool share once (`sagemeter.options.inspect`, `.combine`, `.run`, `.serve`,
`.sagemaker`): each face's flags and arguments are the model's, with its names, bounds and help,
and a value past a bound is the same sentence on both faces (exit 2 on the command line, a tool
error over MCP). A flag or an argument added to one face by hand, or a bound or a help text
changed in one place, fails here."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
import typer
from mcp.client import Client
from pydantic import TypeAdapter
from rich.markup import escape
from typer.testing import CliRunner

from sagemeter.errors import UserError, exit_code
from sagemeter.mcp.server import ServerConfig, build_server
from sagemeter.options.base import Option
from sagemeter.options.combine import COMBINE
from sagemeter.options.command import Command
from sagemeter.options.inspect import INSPECT
from sagemeter.options.run import RUN
from sagemeter.options.sagemaker import DEPLOY, INVOKE, LIST, LOGS, PRICE, QUOTA, STATUS
from sagemeter.options.serve import SERVE
from tests import cli_run

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
        frozenset({"name", "model", "poll_seconds"}),
        # the tool's own environment object, and its null (not 0) for vLLM's own
        frozenset({"name", "model_id", "env", "max_model_len", "gpu_memory_utilization"}),
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


def _mcp_properties(tool: str) -> dict[str, Any]:
    async def listed() -> dict[str, Any]:
        server = build_server(ServerConfig(results_dir=Path("/nonexistent/results")))
        async with Client(server) as client:
            tools = {each.name: each for each in (await client.list_tools()).tools}
        properties: dict[str, Any] = tools[tool].input_schema["properties"]
        return properties

    return anyio.run(listed)


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
        assert param.opts == [option.spelled("cli"), *short], option.name
        assert param.help == escape(faces.command.help(option, "cli")), option.name
        assert param.default == option.info.default, option.name
        if option.info.annotation is bool and option.opt.cli:
            assert param.secondary_opts == [], option.name  # a flag that only turns it on


@pytest.mark.parametrize("faces", FACES, ids=IDS)
def test_the_mcp_tool_has_exactly_the_models_options(faces: Faces) -> None:
    properties = _mcp_properties(faces.tool)
    options = [option for option in faces.command.options() if option.on("mcp")]
    assert set(properties) == {option.spelled("mcp") for option in options} | faces.mcp_only
    for option in options:
        prop = properties[option.spelled("mcp")]
        assert _bounds(prop) == _own_bounds(option), option.name
        assert prop.get("default") == option.info.default, option.name
        assert prop["description"] == faces.command.help(option, "mcp"), option.name


def test_each_face_names_the_others_options_as_it_spells_them() -> None:
    """`{gpu}` and `{resume}` in a help text are each face's spelling: `resume` is no option of
    the model (a path on the command line, a folder's name over MCP) but its help names it."""
    bandwidth, cap = INSPECT.option("bandwidth"), RUN.option("max_cost_usd")
    assert INSPECT.help(bandwidth, "cli").endswith("instead of --gpu")
    assert INSPECT.help(bandwidth, "mcp").endswith("instead of gpu")
    assert RUN.help(cap, "cli").startswith("with --resume: ")
    assert RUN.help(cap, "mcp").startswith("with resume: ")
    margin = COMBINE.option("margin")
    assert COMBINE.help(margin, "cli").endswith("[the one the first result declared, else 2]")
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
    from tests.mcp_helpers import error_line

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
