"""`--method article`: every way the article's method differs from ours is a named setting, set
together, recorded in the result's settings, and overridable one by one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from sagemeter.errors import UserError
from sagemeter.mcp import ServerConfig, build_server
from sagemeter.options.measure import MEASURE
from sagemeter.settings import (
    ARTICLE_STORY,
    METHOD_SETTINGS,
    MeasureSettings,
    measure_settings,
    quick_settings,
    with_method,
)
from tests.mcp_helpers import error_line


def test_ours_is_the_default_and_the_article_method_sets_its_named_settings() -> None:
    ours = measure_settings(False, {})
    assert ours.method == "sagemeter" and ours == MeasureSettings()
    article = measure_settings(False, {}, method="article")
    assert article.method == "article"
    assert article.decode_prompt == article.load_prompt == ARTICLE_STORY  # one prompt for all
    assert article.quality_max_tokens == 64
    assert article.quality_seed is None  # no seed sent
    assert article.load_statistic == "median"  # median of a level's batch rates
    assert article.batch_pause_s == 12.0
    assert article.scoring == "article"
    assert article.decode_warmup == 0
    # everything else is the same: counts, lengths, levels, questions
    same = set(MeasureSettings.model_fields) - set(METHOD_SETTINGS["article"]) - {"method"}
    assert {key: getattr(article, key) for key in same} == {key: getattr(ours, key) for key in same}


def test_both_methods_name_the_same_settings_and_ours_are_the_defaults() -> None:
    assert set(METHOD_SETTINGS["sagemeter"]) == set(METHOD_SETTINGS["article"])
    defaults = MeasureSettings()
    assert {key: getattr(defaults, key) for key in METHOD_SETTINGS["sagemeter"]} == (
        METHOD_SETTINGS["sagemeter"]
    )
    assert with_method(with_method(defaults, "article"), "sagemeter") == defaults


def test_explicit_settings_win_over_the_method_and_are_recorded() -> None:
    settings = measure_settings(False, {"quality_max_tokens": 48}, method="article")
    assert settings.quality_max_tokens == 48 and settings.scoring == "article"
    assert settings.model_dump()["method"] == "article"


def test_quick_keeps_its_lengths_under_the_article_method() -> None:
    quick = measure_settings(True, {}, method="article")
    assert quick.quick and quick.long_tokens == quick_settings().long_tokens
    assert quick.load_statistic == "median"
    assert measure_settings(True, {}, method="sagemeter") == quick_settings()


def test_an_unknown_method_is_one_clear_error() -> None:
    with pytest.raises(UserError, match=r"--method 'bogus': give one of sagemeter, article"):
        measure_settings(False, {}, method="bogus", label=MEASURE.label("cli"))


async def test_the_mcp_measure_tool_takes_the_method_and_refuses_an_unknown_one(
    tmp_path: Path,
) -> None:
    async with Client(build_server(ServerConfig(results_dir=tmp_path / "results"))) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        schema = tools["measure_endpoint"].input_schema["properties"]["method"]
        assert {"sagemeter", "article"} <= set(json.dumps(schema).split('"'))
        refused = await client.call_tool(
            "measure_endpoint", {"target": "local:smollm2-q4_1", "method": "bogus"}
        )
    assert error_line(refused).startswith("measure_endpoint: method:")
