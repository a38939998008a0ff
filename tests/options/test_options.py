"""Each of measure's options is declared once (`sagemeter.options.measure`) and shown by every
face from that declaration: the command line's flags, a plan's tables and the MCP tool's
arguments carry the same options, the same bounds and the same default, which is the settings'.

A field added to one face only, or a bound changed in one place, fails here."""

from __future__ import annotations

import json
import operator
from pathlib import Path
from typing import Annotated, Any

import click
import pytest
import typer
from mcp.client import Client
from pydantic import TypeAdapter
from typer.testing import CliRunner

from sagemeter.errors import UserError
from sagemeter.experiment.plan import Plan, parse_plan
from sagemeter.mcp.server import ServerConfig, build_server
from sagemeter.options.base import Option
from sagemeter.options.measure import MEASURE
from sagemeter.settings import MeasureSettings, measure_settings

OPTIONS = list(MEASURE.options())
BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems")
NOTHING = "http://127.0.0.1:9"  # never reached: every refusal comes before a request
# The command line's own inputs, which are no setting (files, the name, the key, --force).
CLI_ONLY = {
    "out_dir",
    "target",
    "name",
    "tokenizer",
    "fidelity_reference",
    "server_log",
    "docker",
    "api_key",
    "force",
}
MCP_ONLY = {"target", "name"}


def _app() -> typer.Typer:
    from sagemeter.cli import measure

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.callback()
    def _group() -> None:
        pass

    measure.register(app)
    return app


APP = _app()


def _cli_params() -> dict[str, click.Parameter]:
    group: Any = typer.main.get_command(APP)
    return {str(param.name): param for param in group.commands["measure"].params}


def _mcp_properties() -> dict[str, Any]:
    import anyio

    async def listed() -> dict[str, Any]:
        server = build_server(ServerConfig(results_dir=Path("/nonexistent/results")))
        async with Client(server) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        schema: dict[str, Any] = tools["measure_endpoint"].input_schema
        return schema["properties"]

    return anyio.run(listed)


def _plan_properties(table: str) -> dict[str, Any]:
    schema = Plan.model_json_schema()
    name = {"measure": "MeasureOptions", "stop": "StopOptions"}[table]
    properties: dict[str, Any] = schema["$defs"][name]["properties"]
    return properties


def _bounds(schema: dict[str, Any]) -> dict[str, Any]:
    """The bounds and the allowed values of a JSON schema, its `null` branch left out."""
    branches = [branch for branch in schema.get("anyOf", [schema]) if branch.get("type") != "null"]
    assert len(branches) == 1, schema
    branch = branches[0]
    return {key: branch[key] for key in (*BOUNDS, "enum", "type") if key in branch}


def _own_bounds(option: Option) -> dict[str, Any]:
    kind = operator.getitem(Annotated, (option.info.annotation, *option.info.metadata))
    return _bounds(TypeAdapter(kind).json_schema())


def test_every_option_is_a_setting_with_the_settings_bounds() -> None:
    """An option sets a field of MeasureSettings (or is marked as none) within the same bounds,
    and its spelling on the command line is the one the settings' messages use."""
    settings = MeasureSettings.model_json_schema()["properties"]
    for option in OPTIONS:
        if option.setting is None:
            assert option.name == "ray"  # the one option that is no setting of the result
            continue
        assert option.setting in settings, option.name
        assert _own_bounds(option) == _bounds(settings[option.setting]), option.name


def test_the_settings_messages_name_each_setting_by_its_options_flag() -> None:
    """The settings name no flag of their own: a message names a setting the way the face that
    gave it spells it, from the option's declaration (`--levels` for `load_levels`)."""
    cli = MEASURE.label("cli")
    with pytest.raises(UserError, match=r"^--levels: 4 given twice"):
        measure_settings(False, {"load_levels": [4, 4]}, label=cli)
    with pytest.raises(UserError, match=r"^--max-repeats 2 is below --repeats 5"):
        measure_settings(False, {"speed_precision": 0.1, "speed_max_repeats": 2}, label=cli)
    with pytest.raises(UserError, match=r"^measure\.levels: 4 given twice"):
        measure_settings(False, {"load_levels": [4, 4]}, label=MEASURE.label("plan"))
    # no face: the settings field itself
    with pytest.raises(UserError, match=r"^load_levels: 4 given twice"):
        measure_settings(False, {"load_levels": [4, 4]})


def test_the_command_line_has_exactly_the_options_with_their_defaults() -> None:
    params = _cli_params()
    shown = {option.name for option in OPTIONS if option.on("cli")}
    assert set(params) - {"help"} == shown | CLI_ONLY  # nothing added by hand beside the model
    for option in OPTIONS:
        param = params[option.name]
        assert option.spelled("cli") in param.opts, option.name
        default = MEASURE.default_text(option, "cli")
        if default:
            assert f"[{default}]" in str(param.help), (option.name, param.help)
        assert param.default == option.info.default, option.name


def test_the_mcp_tool_has_exactly_the_options_with_their_bounds_and_defaults() -> None:
    properties = _mcp_properties()
    on_mcp = [option for option in OPTIONS if option.on("mcp")]
    assert set(properties) == {option.spelled("mcp") for option in on_mcp} | MCP_ONLY
    for option in on_mcp:
        prop = properties[option.spelled("mcp")]
        assert _bounds(prop) == _own_bounds(option), option.name
        assert prop.get("default") == option.info.default, option.name
        default = MEASURE.default_text(option, "mcp")
        if default:
            assert f"(default: {default})" in prop["description"], option.name
    # the options MCP lacked until the faces were made from one model
    assert {"fidelity_prompts", "batch_reruns", "startup_timeout_s"} <= set(properties)
    assert "ray" not in properties  # said why in the option's declaration
    assert dict(MEASURE.option("ray").opt.not_on)["mcp"]


def test_the_plan_tables_have_exactly_the_options_with_their_bounds() -> None:
    for model in MEASURE.models:
        properties = _plan_properties(model.TABLE)
        own = {option.name for option in model.options()}
        extra = {"quality", "block"} if model.TABLE == "stop" else set()
        assert set(properties) == own | extra, model.TABLE
        for option in model.options():
            assert _bounds(properties[option.name]) == _own_bounds(option), option.name


def test_every_default_shown_is_the_settings_default() -> None:
    defaults = MeasureSettings()
    for option in OPTIONS:
        if option.setting is None or option.info.default is not None:
            continue
        value = getattr(defaults, option.setting)
        assert MEASURE.default_value(option) == value
        shown = MEASURE.default_text(option, "mcp").split(";")[0]
        if value is None:
            assert shown == (option.opt.unset or "none"), option.name
        elif isinstance(value, list | str):
            assert shown == (json.dumps(value) if isinstance(value, list) else value)
        else:
            assert float(shown) == value, option.name
    assert MEASURE.default_text(MEASURE.option("timeout"), "cli") == "120s"
    assert MEASURE.default_text(MEASURE.option("prefill_tokens"), "cli") == (
        "256,4096; none with --quick; none with --method article"
    )


@pytest.mark.parametrize(
    "option", [o for o in OPTIONS if _own_bounds(o).get("maximum")], ids=lambda o: o.name
)
def test_each_face_refuses_a_value_past_the_bound_naming_the_option(
    option: Option, tmp_path: Path
) -> None:
    """One past the upper bound is one line naming the option as each face spells it (the
    command line, a plan), before any work."""
    top = _own_bounds(option)["maximum"]
    value = top * 2 if isinstance(top, int) else top * 1.5
    text = str(int(value)) if isinstance(top, int) else f"{value:g}"
    done = CliRunner().invoke(
        APP, ["measure", str(tmp_path / "m"), NOTHING, option.spelled("cli"), text]
    )
    assert isinstance(done.exception, UserError), done.output
    assert str(done.exception).startswith(option.spelled("cli")), done.exception
    assert not (tmp_path / "m").exists()
    table = option.model.TABLE
    plan = f'name = "p"\n[{table}]\n{option.name} = {text}\n'
    plan += '[[arm]]\nname = "a"\ntarget = "http://127.0.0.1:9"\n'
    plan += '[[arm]]\nname = "b"\ntarget = "http://127.0.0.1:9"\n'
    with pytest.raises(UserError, match=rf"{option.spelled('plan')}: Input should be less"):
        parse_plan(plan, "p.toml")


OLD_PLAN = """name = "old"
[measure]
quick = true
method = "article"
short-tokens = 8
long_tokens = 64
repeats = 3
prefill_tokens = "64,512"
long_prompt_levels = "1,2"
levels = "1,2,4"
load_tokens = 32
batches = 2
questions = "article-40"
quality_max_tokens = 20
questions_per_family = 3
margin = 4.5
fidelity = 2
timeout = "90s"
stall = 12
startup_timeout = "5m"
retries = 1
reruns = 0
metrics_wait = "1m"
[stop]
speed = 0.05
max_repeats = 9
max_batches = 4
max_minutes = 30
[[arm]]
name = "a"
target = "http://127.0.0.1:9"
[[arm]]
name = "b"
target = "http://127.0.0.1:9"
"""


def test_a_plan_written_before_reads_to_the_same_settings() -> None:
    """Every [measure] and [stop] key a plan could hold, in the forms plans were written in
    (text as the command line writes it, `-` or `_`), gives the settings it always gave."""
    settings = parse_plan(OLD_PLAN, "old.toml").settings()
    assert settings.quick and settings.method == "article"
    assert (settings.short_tokens, settings.long_tokens, settings.decode_repeats) == (8, 64, 3)
    assert (settings.prefill_tokens, settings.long_prompt_levels) == ([64, 512], [1, 2])
    assert (settings.load_levels, settings.load_max_tokens, settings.load_batches) == (
        [1, 2, 4],
        32,
        2,
    )
    assert (settings.questions, settings.quality_max_tokens, settings.questions_per_family) == (
        "article-40",
        20,
        3,
    )
    assert (settings.margin_points, settings.fidelity_prompts) == (4.5, 2)
    assert (settings.timeout_s, settings.stall_s, settings.startup_timeout_s) == (90, 12, 300)
    assert (settings.retries, settings.batch_reruns, settings.metrics_wait_s) == (1, 0, 60)
    assert (settings.speed_precision, settings.speed_max_repeats) == (0.05, 9)
    assert (settings.speed_max_batches, settings.max_minutes) == (4, 30)
    assert settings.load_statistic == "median"  # the article's, kept under quick


def test_the_faces_give_the_same_settings_for_the_same_options() -> None:
    """The same choices through the command line's text, a plan and MCP's JSON are one
    MeasureSettings."""
    from sagemeter.cli.measure import _settings
    from sagemeter.options.faces import read_options

    cli = _settings(quick=True, levels="1,2", timeout="2m", reruns=1, speed="0.1")
    plan = parse_plan(
        OLD_PLAN.split("[measure]")[0]
        + "[measure]\nquick = true\nlevels = [1, 2]\ntimeout = 120\nreruns = 1\n"
        + "[stop]\nspeed = 0.1\n"
        + "[[arm]]"
        + OLD_PLAN.split("[[arm]]", 1)[1],
        "p.toml",
    ).settings()
    given = {"quick": True, "load_levels": [1, 2], "timeout_s": 120.0, "batch_reruns": 1}
    measure, stop = read_options(MEASURE, {**given, "speed_precision": 0.1}, "mcp")
    mcp = measure.settings(stop, face="mcp")  # type: ignore[attr-defined]
    assert cli == plan == mcp


def test_the_mcp_tool_refuses_a_value_past_each_bound_naming_its_argument(tmp_path: Path) -> None:
    """One past each upper bound, or two levels alike, is the tool's one-line error naming the
    argument, and no result is written."""
    import anyio

    from tests.mcp_helpers import error_line

    cases = [
        (option.spelled("mcp"), _own_bounds(option)["maximum"] * 2)
        for option in OPTIONS
        if option.on("mcp") and _own_bounds(option).get("maximum")
    ]
    cases.append(("load_levels", [4, 4]))

    async def refused() -> list[tuple[str, str]]:
        server = build_server(ServerConfig(results_dir=tmp_path / "results"))
        lines = []
        async with Client(server) as client:
            for argument, value in cases:
                answer = await client.call_tool(
                    "measure_endpoint", {"target": NOTHING, argument: value}
                )
                lines.append((argument, error_line(answer)))
        return lines

    lines = anyio.run(refused)
    assert len(lines) == len(cases)
    for argument, line in lines:
        assert line.startswith(f"measure_endpoint: {argument}: "), line
        assert "Value error" not in line, line
    assert dict(lines)["load_levels"].endswith(
        "4 given twice; give each level once (see the tool's input schema)"
    )
    assert not list((tmp_path / "results").glob("*.json"))


def test_the_demo_flags_are_measures_options_with_the_demos_defaults() -> None:
    """`sagemeter demo`'s --questions, --questions-per-family, --margin and --fidelity are made
    from measure's model: the same flags and types, the demo's defaults in their help; a flag
    added to the demo by hand, or one dropped from it, fails here."""
    from sagemeter.cli import run
    from sagemeter.experiment.demo import DEMO, DEMO_FLAGS
    from sagemeter.settings import demo_settings

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.callback()
    def _group() -> None:
        pass

    run.register(app)
    group: Any = typer.main.get_command(app)
    params = {str(param.name): param for param in group.commands["demo"].params}
    assert set(params) - {"help"} == {*DEMO_FLAGS, "out", "quick"}
    for name in DEMO_FLAGS:
        option = MEASURE.option(name)
        param = params[name]
        assert param.opts == [option.spelled("cli")], name
        assert param.default is None, name
        shown = DEMO.default_text(option, "cli")
        assert f"[{shown}]" in str(param.help), (name, param.help)
    assert demo_settings().fidelity_prompts == 8
    assert DEMO.default_text(MEASURE.option("fidelity"), "cli").startswith("8")
    assert DEMO.default_text(MEASURE.option("questions_per_family"), "cli").startswith("all")


def test_the_demo_refuses_a_bad_value_naming_its_flag(tmp_path: Path) -> None:
    """A value past measure's bound is one line naming the demo's flag, before any work."""
    from sagemeter.cli import run

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.callback()
    def _group() -> None:
        pass

    run.register(app)
    for flag, value in (("--margin", "1000"), ("--questions-per-family", "0")):
        done = CliRunner().invoke(app, ["demo", "--out", str(tmp_path / "d"), flag, value])
        assert isinstance(done.exception, UserError), done.output
        assert str(done.exception).startswith(flag), done.exception
        assert not (tmp_path / "d").exists()
