"""The SLO search's options are declared once (`sagemeter.options.slo.SloOptions`): a plan's
`[slo]` table is the model, the MCP tool `find_operating_point`'s arguments are made from it
(its names, milliseconds for the latency targets); `sagemeter load`'s SLO flags are its fields
(tests/options/test_load_options.py). A field added to one face only, or a bound changed in one
place, fails here."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp.client import Client
from pydantic import TypeAdapter

from sagemeter.experiment.plan import Plan
from sagemeter.mcp.server import ServerConfig, build_server
from sagemeter.options.base import Option
from sagemeter.options.faces import read_scaled
from sagemeter.options.slo import SLO, SloOptions, load_fields

OPTIONS = list(SloOptions.options())
BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum", "type")
NOTHING = "http://127.0.0.1:9"  # never reached: every refusal comes before a request
# The tool's own inputs beside the search's options (a plan takes the price from its arms).
MCP_ONLY = {"target", "name", "price_per_hour"}


def _mcp_properties() -> dict[str, Any]:
    async def listed() -> dict[str, Any]:
        server = build_server(ServerConfig(results_dir=Path("/nonexistent/results")))
        async with Client(server) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        properties: dict[str, Any] = tools["find_operating_point"].input_schema["properties"]
        return properties

    return anyio.run(listed)


def _bounds(schema: dict[str, Any]) -> dict[str, Any]:
    """The bounds and the allowed values of a JSON schema, its `null` branch left out."""
    branches = [branch for branch in schema.get("anyOf", [schema]) if branch.get("type") != "null"]
    assert len(branches) == 1, schema
    return {key: branches[0][key] for key in BOUNDS if key in branches[0]}


def _own_bounds(option: Option, factor: float = 1) -> dict[str, Any]:
    kind = operator.getitem(Annotated, (option.info.annotation, *option.info.metadata))
    bounds = _bounds(TypeAdapter(kind).json_schema())
    return {
        key: value * factor if key not in ("enum", "type") else value
        for key, value in bounds.items()
    }


def test_the_mcp_tool_has_exactly_the_options_in_its_units() -> None:
    properties = _mcp_properties()
    assert set(properties) == {option.spelled("mcp") for option in OPTIONS} | MCP_ONLY
    for option in OPTIONS:
        prop = properties[option.spelled("mcp")]
        factor = option.scale("mcp")
        assert _bounds(prop) == _own_bounds(option, factor), option.name
        default = option.info.default
        if isinstance(default, int | float):
            default *= factor
        assert prop.get("default") == default, option.name
        assert prop["description"] == SLO.help(option, "mcp"), option.name
    # the latency targets in milliseconds, as the tool always took them
    assert properties["slo_ttft_ms"]["description"] == "TTFT SLO: ms (default: no TTFT target)"
    assert _bounds(properties["slo_tpot_ms"])["maximum"] == 86_400_000
    assert "burstiness" in properties  # what the tool lacked until it was made from the model


def test_the_plan_table_is_the_model() -> None:
    properties = Plan.model_json_schema()["$defs"]["SloOptions"]["properties"]
    assert set(properties) == {option.name for option in OPTIONS}
    for option in OPTIONS:
        assert _bounds(properties[option.name]) == _own_bounds(option), option.name
        assert option.spelled("plan") == f"slo.{option.name}"


def test_a_plan_and_mcp_give_the_same_search() -> None:
    """The same target through a plan's seconds and MCP's milliseconds is one LoadSettings."""
    plan = SloOptions.model_validate(
        {"ttft": "500ms", "tpot": 0.02, "search": "rate", "rate": 2, "burstiness": 0.5}
    )
    properties = _mcp_properties()
    mcp = {
        option.spelled("mcp"): properties[option.spelled("mcp")].get("default")
        for option in OPTIONS
    }
    mcp |= {"slo_ttft_ms": 500, "slo_tpot_ms": 20, "search": "rate", "start_rate": 2}
    mcp |= {"burstiness": 0.5}
    given = {o.name: read_scaled(o, mcp[o.spelled("mcp")], "mcp") for o in OPTIONS}
    assert load_fields(given) == load_fields(plan.model_dump())
    assert load_fields(given)["slo_ttft_s"] == 0.5
    assert load_fields(plan.model_dump() | {"search": "concurrency"})["rate"] is None


def test_the_mcp_tool_refuses_burstiness_past_its_bound(tmp_path: Path) -> None:
    from tests.mcp_helpers import error_line

    async def refused() -> str:
        server = build_server(ServerConfig(results_dir=tmp_path / "results"))
        async with Client(server) as client:
            answer = await client.call_tool(
                "find_operating_point",
                {"target": NOTHING, "name": "x", "slo_ttft_ms": 500, "burstiness": 5000},
            )
        return error_line(answer)

    line = anyio.run(refused)
    assert line.startswith("find_operating_point: burstiness: "), line
    assert not list((tmp_path / "results").glob("*"))


def test_every_option_sets_a_load_setting() -> None:
    from sagemeter.loadgen.settings import LoadSettings

    settings = set(LoadSettings.model_fields)
    assert {option.setting for option in OPTIONS} <= settings
    assert len({option.setting for option in OPTIONS}) == len(OPTIONS)
