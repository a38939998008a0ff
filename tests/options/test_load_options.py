"""`sagemeter load`'s options are one model (`sagemeter.options.load.LoadOptions`): the command's
parameters ARE its fields (flag, help, default), its SLO flags are the SLO search's own
declarations, a bound broken on the command line is the model's refusal (one line, exit 2,
before any work), and the MCP tool that takes one of its settings takes that declaration."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
import typer
from annotated_types import Ge, Gt, Le, Lt
from mcp.client import Client
from pydantic import TypeAdapter
from rich.markup import escape
from typer.testing import CliRunner

from sagemeter.errors import UserError, exit_code
from sagemeter.loadgen.settings import LoadSettings
from sagemeter.mcp.server import ServerConfig, build_server
from sagemeter.options.base import Opt, Option
from sagemeter.options.faces import cli_default, cli_type
from sagemeter.options.load import LOAD, LoadOptions
from sagemeter.options.slo import SloOptions
from tests.test_outputs import APP

OPTIONS = list(LoadOptions.options())
NOTHING = "http://127.0.0.1:9"  # never reached: every refusal comes before a request
# LoadOptions' fields that are SloOptions' (the SLO flags), by the search's own names.
FROM_SLO = {"slo_ttft": "ttft", "slo_tpot": "tpot", "slo_percentile": "percentile"}


def _load_command() -> Any:
    from sagemeter.cli import load

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.callback()
    def _group() -> None:
        pass

    load.register(app)
    group: Any = typer.main.get_command(app)
    return group.commands["load"]


def _params() -> dict[str, Any]:
    return {str(param.name): param for param in _load_command().params}


def test_every_option_is_one_flag_with_the_models_help_and_default() -> None:
    params = _params()
    assert set(params) - {"target", "help"} == {option.name for option in OPTIONS}
    for option in OPTIONS:
        param = params[option.name]
        assert param.param_type_name == "option", option.name
        assert option.spelled("cli") in param.opts, option.name
        if option.opt.short is not None:
            assert option.opt.short in param.opts, option.name
        assert param.help == escape(LOAD.help(option, "cli")), option.name
        expected = cli_default(LOAD, option)
        if cli_type(option) is bool:
            assert param.default is bool(option.info.default), option.name
        else:
            assert param.default == expected, option.name
        assert param.envvar == option.opt.envvar, option.name
    # what the command line has always shown, now read from the model
    assert params["concurrency"].opts == ["--concurrency", "-c"]
    assert params["concurrency"].default == 16
    assert params["timeout"].default == "300s"  # the model's 300.0 seconds as the CLI writes it
    assert params["workers"].help == "client processes \\[cores] [1<=x<=512]"
    assert params["output_tokens"].help.endswith("same forms [--max-tokens]")
    assert params["sweep"].opts == ["--sweep"] and not params["sweep"].secondary_opts
    assert params["api_key"].envvar == "OPENAI_API_KEY"


def test_the_slo_flags_are_the_slo_searchs_own_declarations() -> None:
    """Type, bounds, setting, flag and text come from SloOptions; load only words the help."""
    for name, slo_name in FROM_SLO.items():
        mine, theirs = LoadOptions.model_fields[name], SloOptions.model_fields[slo_name]
        assert mine.annotation == theirs.annotation, name
        assert mine.default == theirs.default, name

        def bounds(metadata: list[Any]) -> list[Any]:
            return [item for item in metadata if not isinstance(item, Opt)]

        assert bounds(mine.metadata) == bounds(theirs.metadata), name
        option = next(option for option in OPTIONS if option.name == name)
        source = next(option for option in SloOptions.options() if option.name == slo_name)
        assert option.setting == source.setting and option.opt.refuse == source.opt.refuse
        assert option.spelled("cli") == source.spelled("cli")
    assert LoadOptions.model_validate({"slo_ttft": "250ms"}).slo_ttft == 0.25


def test_every_setting_an_option_sets_is_the_load_generators() -> None:
    settings = [option.setting for option in OPTIONS if option.setting is not None]
    assert set(settings) <= set(LoadSettings.model_fields)
    assert len(set(settings)) == len(settings)


def _past_bound(option: Option) -> list[tuple[str, Any]]:
    """Each bound of `option` broken: (the command line's text, the value the model gets)."""
    cases = []
    for item in option.info.metadata:
        if isinstance(item, Gt | Ge):
            low = item.gt if isinstance(item, Gt) else item.ge - 1
            cases.append(low)
        elif isinstance(item, Le | Lt) and option.text is None:  # a duration's text stops at 24h
            high = item.le if isinstance(item, Le) else item.lt
            cases.append(high * 10 if isinstance(high, float) else high + 1)
    kind = cli_type(option)
    return [
        (str(value), option.text.parse(str(value), "x") if option.text else kind(str(value)))
        for value in cases
    ]


BOUNDED = [(option, case) for option in OPTIONS for case in _past_bound(option)]


@pytest.mark.parametrize(("option", "case"), BOUNDED, ids=lambda v: getattr(v, "name", str(v)))
def test_a_bound_broken_on_the_command_line_is_the_models_refusal(
    option: Option, case: tuple[str, Any], tmp_path: Path
) -> None:
    text, value = case
    with pytest.raises(UserError) as refused:
        LOAD.validated(LoadOptions, {option.name: value}, "cli")
    expected = str(refused.value)
    assert expected.startswith(f"{option.spelled('cli')} {value!r}: "), expected
    if option.opt.refuse is not None:
        assert expected.endswith(option.opt.refuse)
    done = CliRunner().invoke(
        APP, ["load", NOTHING, option.spelled("cli"), text, "--out", str(tmp_path / "r.json")]
    )
    assert isinstance(done.exception, UserError), done.output
    assert exit_code(done.exception) == 2  # what `sagemeter` exits with, the line its message
    assert str(done.exception) == expected
    assert not list(tmp_path.iterdir()), "work started before the refusal"


def test_the_refusals_say_what_load_always_said(tmp_path: Path) -> None:
    cases = {
        ("--concurrency", "5000"): "--concurrency 5000: give 1 to 4096 streams at once",
        ("--slo-ttft", "0ms"): "--slo-ttft 0.0: give a positive duration, e.g. 200ms",
        ("--search", "latency"): "--search 'latency': give concurrency or rate",
        ("--max-tokens", "0"): "--max-tokens 0: Input should be greater than or equal to 1",
    }
    for (flag, text), expected in cases.items():
        done = CliRunner().invoke(APP, ["load", NOTHING, flag, text])
        assert isinstance(done.exception, UserError), done.output
        assert exit_code(done.exception) == 2 and str(done.exception) == expected
    assert BOUNDED, "no bounded option found"
    assert {option.name for option, _ in BOUNDED} >= {"concurrency", "rate", "slo_ttft", "seed"}


def test_the_mcp_tools_price_is_loads_declaration() -> None:
    async def listed() -> dict[str, Any]:
        server = build_server(ServerConfig(results_dir=Path("/nonexistent/results")))
        async with Client(server) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        schema: dict[str, Any] = tools["find_operating_point"].input_schema["properties"]
        return schema

    prop = anyio.run(listed)["price_per_hour"]
    option = next(option for option in OPTIONS if option.name == "price_per_hour")
    assert prop["description"] == LOAD.help(option, "mcp")
    kind = operator.getitem(Annotated, (option.info.annotation, *option.info.metadata))
    own = TypeAdapter(kind).json_schema()["anyOf"][0]
    number = next(branch for branch in prop["anyOf"] if branch.get("type") == "number")
    assert number["exclusiveMinimum"] == own["exclusiveMinimum"] == 0
    assert number["maximum"] == own["maximum"]
