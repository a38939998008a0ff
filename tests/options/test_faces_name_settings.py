"""A refusal names each setting in the words of the face the user used: `--concurrency` on the
command line, `slo.concurrency` (or `concurrency`, after its table) in a plan, `max_concurrency`
in an MCP call. A value past its bound is its option's refusal (the options model holds every
bound, once); settings that do not go together are weighed by the load generator's settings,
which name each one as `{field}` (`SettingsError`) for the face to spell. Every refusal is one
line, exit 2 on the command line or a tool error over MCP, before any work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from typer.testing import CliRunner

from sagemeter.errors import SettingsError, UserError, exit_code
from sagemeter.loadgen.settings import LoadSettings
from sagemeter.mcp.server import ServerConfig, build_server
from sagemeter.options.load import LOAD
from tests.mcp_helpers import error_line
from tests.test_outputs import APP

NOTHING = "http://127.0.0.1:9"  # never reached: every refusal comes before a request
PLAN = """name = "p"

[[arm]]
name = "a"
target = "http://127.0.0.1:8001"

[[arm]]
name = "b"
target = "http://127.0.0.1:8002"

[slo]
{slo}
"""

# (what is wrong, CLI flags, the CLI's line, [slo] keys, the plan's line, MCP arguments, MCP's)
CASES: list[tuple[str, list[str], str, str, str, dict[str, Any], str]] = [
    (
        "a bound",
        ["--concurrency", "0"],
        "--concurrency 0: give 1 to 4096 streams at once",
        'ttft = "1s"\nconcurrency = 0',
        "slo.concurrency: Input should be greater than or equal to 1",
        {"slo_ttft_ms": 500, "max_concurrency": 0},
        "max_concurrency: Input should be greater than or equal to 1",
    ),
    (
        "a percentile no result carries",
        ["--slo-ttft", "1s", "--slo-percentile", "95"],
        "--slo-percentile 95.0: give 50, 90 or 99 (the percentiles a load result carries)",
        'ttft = "1s"\npercentile = 95',
        "slo.percentile: give 50, 90 or 99 (the percentiles a load result carries)",
        {"slo_ttft_ms": 500, "percentile": 95},
        "percentile: give 50, 90 or 99 (the percentiles a load result carries)",
    ),
    (
        "a rate search without its first rate",
        ["--search", "rate", "--slo-ttft", "1s"],
        "--search rate starts at --rate: give the first rate to try, e.g. 2",
        'ttft = "1s"\nsearch = "rate"',
        "slo: search = rate starts at `rate`: give the first rate to try",
        {"slo_ttft_ms": 500, "search": "rate"},
        "search = rate starts at `start_rate`: give the first rate to try",
    ),
    (
        "a search without a latency target",
        ["--search", "concurrency"],
        "--search concurrency looks for the largest load that meets the SLO: give --slo-ttft, "
        "--slo-tpot or both",
        "percentile = 99",
        "slo: give ttft, tpot or both (the latency target searched against)",
        {},
        "give slo_ttft_ms, slo_tpot_ms or both (the latency target searched against)",
    ),
    (
        "burstiness without Poisson arrivals",
        ["--burstiness", "2"],
        "--burstiness shapes the arrivals of --rate: give --rate too",
        'ttft = "1s"\nburstiness = 2',
        "slo: burstiness shapes the arrivals of search = rate",
        {"slo_ttft_ms": 500, "burstiness": 2},
        "burstiness shapes the arrivals of search = rate",
    ),
]
IDS = [case[0] for case in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_command_line_names_the_flag(case: tuple[Any, ...], tmp_path: Path) -> None:
    _, flags, line, *_ = case
    out = tmp_path / "r.json"
    done = CliRunner().invoke(APP, ["load", NOTHING, *flags, "--out", str(out)])
    assert isinstance(done.exception, UserError), done.output
    assert str(done.exception) == line
    assert exit_code(done.exception) == 2
    assert not list(tmp_path.iterdir()), "work started before the refusal"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_plan_names_its_key(case: tuple[Any, ...], tmp_path: Path) -> None:
    _, _, _, slo, line, *_ = case
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN.format(slo=slo), encoding="utf-8")
    done = CliRunner().invoke(APP, ["run", str(plan), "--dry-run"])
    assert done.exit_code == 2, done.output  # `run` prints its one line itself
    assert done.output.strip() == f"error: {plan}: {line}"
    assert [path.name for path in tmp_path.iterdir()] == ["plan.toml"]


def test_an_mcp_call_names_its_argument(tmp_path: Path) -> None:
    results = tmp_path / "results"

    async def answers() -> list[str]:
        async with Client(build_server(ServerConfig(results_dir=results))) as client:
            lines = []
            for *_, arguments, _ in CASES:
                answer = await client.call_tool(
                    "find_operating_point", {"target": NOTHING, "name": "x", **arguments}
                )
                lines.append(error_line(answer))
            return lines

    for line, case in zip(anyio.run(answers), CASES, strict=True):
        expected = case[-1]
        # a bound is the tool's schema's refusal, which names the tool first
        assert line in (expected, f"find_operating_point: {expected} (see the tool's input schema)")
        assert "--" not in line, line  # no flag the assistant never typed
    assert not results.exists() or not list(results.iterdir()), "a tool wrote before refusing"


def test_settings_name_each_setting_by_its_field_until_a_face_spells_it() -> None:
    """The load generator's own words, for a caller of the library: the field's name; the
    command line's face turns it into the flag; names no face knows stay the field's."""
    settings = LoadSettings(target=NOTHING, rate=2.0, sweep=True)
    with pytest.raises(SettingsError) as raw:
        settings.checked()
    assert str(raw.value) == "sweep raises concurrency step by step; it cannot go with rate"
    assert raw.value.template == (
        "{sweep} raises {concurrency} step by step; it cannot go with {rate}"
    )
    with pytest.raises(UserError) as spelled, LOAD.spelling("cli"):
        settings.checked()
    assert (
        str(spelled.value) == "--sweep raises --concurrency step by step; it cannot go with --rate"
    )
    assert LOAD.spell("{rate} and {not_an_option}", "cli") == "--rate and {not_an_option}"


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--sessions", "0"], "--sessions 0: give 1 to 1024"),
        (["--sessions", "2", "--turns", "65"], "--turns 65: give 1 to 64"),
        (["--sessions", "2", "--rate", "3"], "--sessions runs conversations; leave out --rate"),
        (
            ["--sessions", "2", "--api", "completions"],
            "--sessions carries a conversation in chat messages: use --api chat",
        ),
        (["--input-tokens", "fixed:0"], "--input-tokens 'fixed:0': give a whole number"),
        (["--trace-speed", "2"], "--trace-speed scales a --trace's times: give --trace too"),
        (["--start-at", "5"], "--start-at 5.000 is in the past"),
    ],
)
def test_the_load_commands_own_refusals_name_its_flags(
    flags: list[str], line: str, tmp_path: Path
) -> None:
    done = CliRunner().invoke(APP, ["load", NOTHING, *flags, "--out", str(tmp_path / "r.json")])
    assert isinstance(done.exception, UserError), done.output
    assert str(done.exception).startswith(line), str(done.exception)
    assert exit_code(done.exception) == 2
    assert not list(tmp_path.iterdir()), "work started before the refusal"


def test_a_trace_slowed_past_a_day_is_refused_as_a_duration_would_be(tmp_path: Path) -> None:
    """`--duration`'s bound is its option's; a trace's own length (its span over `--trace-speed`)
    is weighed by the command, with both flags named."""
    trace = tmp_path / "t.jsonl"
    rows = [(0, 1), (1000, 2)]
    trace.write_text(
        "".join(
            f'{{"timestamp": {ms}, "input_length": 5, "output_length": 1, "hash_ids": [{h}]}}\n'
            for ms, h in rows
        ),
        encoding="utf-8",
    )
    done = CliRunner().invoke(
        APP, ["load", NOTHING, "--trace", str(trace), "--trace-speed", "0.00001"]
    )
    assert isinstance(done.exception, UserError), done.output
    assert str(done.exception).startswith("--trace lasts 28 h at --trace-speed 1e-05: more than")
    assert exit_code(done.exception) == 2
    with_duration = CliRunner().invoke(
        APP, ["load", NOTHING, "--trace", str(trace), "--trace-speed", "0.00001", "--duration", "0"]
    )
    assert str(with_duration.exception).startswith("--duration 0.0: give a positive number")
