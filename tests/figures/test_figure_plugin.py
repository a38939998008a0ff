"""A figure plug-in as its own distribution: docs/extending.md's example (examples/figure-plugin)
is built and installed by pip, offline, into a folder of its own; with that folder on the path,
a measurement of the truth server carries the figure at the result's top level, and `combine`,
the terminal table and the report show it, with no other code changed.

Truth: 100 ms to the first token, then a token every 10 ms, so every reply decodes at 100 tokens
per second and so does the slowest tenth of them. On a busy machine a reply reads slower, or a
little faster when its first token came late and the rest caught up with the server's clock;
a rate that took the first token's wait into its span would read 70, below the lower bound.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import shutil
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from mcp import Client
from rich.console import Console
from typer.testing import CliRunner

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.figures import problems, registry
from sagemeter.mcp import ServerConfig, build_server
from sagemeter.measure.workflow import measure_target
from sagemeter.report.figures import num
from sagemeter.report.terminal import print_result
from sagemeter.results import load_result
from sagemeter.settings import MeasureSettings
from sagemeter.targets import parse_target
from tests.mcp_helpers import ok, text_of
from tests.report_parse import FIXED_RUN

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "figure-plugin"
KEY = "decode_p10_tokens_per_second"
LABEL = "Decode, slowest tenth of replies (tokens/s)"
TRUTH = TruthTiming(ttft_s=0.1, itl_s=0.01)


def _app() -> typer.Typer:
    """`combine` and `report` as the CLI registers them."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.callback()
    def _group() -> None:
        pass

    for name in ("sagemeter.cli.combine", "sagemeter.cli.report"):
        importlib.import_module(name).register(app)
    return app


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder where pip installed the example distribution (built from a copy of it)."""
    source = tmp_path_factory.mktemp("source") / "figure-plugin"
    shutil.copytree(EXAMPLE, source)
    site = tmp_path_factory.mktemp("site")
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    flags = ["--no-deps", "--no-build-isolation", "--no-index", "--target", str(site)]
    subprocess.run([*pip, *flags, str(source)], check=True, timeout=300)
    assert (site / "sagemeter_slow_decode_figure-0.1.0.dist-info" / "entry_points.txt").is_file()
    return site


@pytest.fixture
def installed(plugin_site: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The plug-in's folder on the path, the registry made to look again (and after)."""
    monkeypatch.syspath_prepend(str(plugin_site))
    registry.reset()
    yield
    monkeypatch.undo()
    registry.reset()


def _settings() -> MeasureSettings:
    return MeasureSettings(
        short_tokens=4,
        long_tokens=24,
        decode_repeats=4,  # four long replies: one more than the figure's floor of three
        prefill_tokens=[],
        load_levels=[1],
        load_max_tokens=8,
        load_batches=1,
        questions_per_family=1,
        quality_max_tokens=8,
        timeout_s=5.0,
    )


@pytest.mark.slow
def test_an_installed_figure_is_measured_and_shown_everywhere(
    installed: None, tmp_path: Path
) -> None:
    assert problems() == []
    run = tmp_path / "run"
    with running_truth_server(TRUTH) as url:
        for name in ("a", "b"):
            asyncio.run(
                measure_target(parse_target(url), name=name, settings=_settings(), out_dir=run)
            )
    truth = 1 / TRUTH.itl_s
    for name in ("a", "b"):
        written = json.loads((run / f"measure-{name}.json").read_text())
        assert 0.8 * truth <= written[KEY] <= 1.1 * truth, written[KEY]
        assert not any(KEY in warning for warning in written["detail"]["warnings"])
    console = Console(record=True, width=200)
    print_result(console, load_result(run / "measure-a.json"))
    assert LABEL in console.export_text()  # the terminal's table of one result

    app = _app()
    out = tmp_path / "compare.json"
    files = [str(run / "measure-a.json"), str(run / "measure-b.json")]
    done = CliRunner().invoke(app, ["combine", str(out), *files], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    assert KEY in done.output  # the terminal table's row
    row = next(r for r in json.loads(out.read_text())["rows"] if r["key"] == KEY)
    assert row["kind"] == "speed"
    assert 0.8 * truth <= row["values"][0] <= 1.1 * truth
    assert row["ratios"][0] == pytest.approx(row["values"][1] / row["values"][0])

    done = CliRunner().invoke(app, ["report", str(run), "--format", "md"])
    assert done.exit_code == 0, done.output
    report = (run / "report.md").read_text()
    line = next(line for line in report.splitlines() if LABEL in line)
    assert num(row["values"][0]) in line and num(row["values"][1]) in line, line


@pytest.mark.slow
def test_a_figure_measured_with_the_plugin_reads_without_it(
    installed: None, plugin_site: Path, tmp_path: Path
) -> None:
    """The key stays in the file; without the plug-in nothing shows it and nothing breaks."""
    with running_truth_server(TRUTH) as url:
        asyncio.run(
            measure_target(parse_target(url), name="a", settings=_settings(), out_dir=tmp_path)
        )
    assert KEY in json.loads((tmp_path / "measure-a.json").read_text())
    shutil.copy(tmp_path / "measure-a.json", tmp_path / "measure-b.json")
    sys.path.remove(str(plugin_site))
    registry.reset()
    out = tmp_path / "compare.json"
    files = [str(tmp_path / "measure-a.json"), str(tmp_path / "measure-b.json")]
    done = CliRunner().invoke(_app(), ["combine", str(out), *files])
    assert done.exit_code == 0, done.output
    assert KEY not in {row["key"] for row in json.loads(out.read_text())["rows"]}


BROKEN = """\
from sagemeter.figures.builtin import TTFT

NOT_A_FIGURE = object()
"""


def test_a_figure_plugin_that_breaks_the_rules_is_left_out_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A distribution on disk whose entry points clash with a built-in figure and a top-level
    key, name an object that is no figure, and name a module that does not import."""
    (tmp_path / "broken_figures.py").write_text(BROKEN)
    info = tmp_path / "broken_figures-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-figures\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[sagemeter.figures]\n"
        "ttft_median_ms = broken_figures:TTFT\n"
        "quality = broken_figures:TTFT\n"
        "not_a_figure = broken_figures:NOT_A_FIGURE\n"
        "missing = no_such_module:FIGURE\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.reset()
    try:
        assert problems() == [
            "the figure plug-in 'missing' could not be loaded: ModuleNotFoundError: No module "
            "named 'no_such_module'",
            "the figure plug-in 'not_a_figure' (object) is not a sagemeter figure; it is left "
            "out (see docs/extending.md)",
            "the figure plug-in 'quality' (broken_figures:TTFT) has the name of another "
            "top-level key of a result; it is left out",
            "the figure plug-in 'ttft_median_ms' (broken_figures:TTFT) has the name of a "
            "built-in figure; it is left out",
        ]
        assert [f.key for f in registry.figures()] == list(registry.BUILT_IN)
        out = tmp_path / "compare.json"
        files = [
            str(FIXED_RUN / "measure-smollm2-f32.json"),
            str(FIXED_RUN / "measure-smollm2-q4_1.json"),
        ]
        done = CliRunner().invoke(_app(), ["combine", str(out), *files], env={"COLUMNS": "400"})
        assert done.exit_code == 0, done.output
        assert all(line in json.loads(out.read_text())["warnings"] for line in problems())
    finally:
        monkeypatch.undo()
        registry.reset()


DIFFERENCE = """\
import statistics

from sagemeter.figures import Declared


def long_reply_ms(detail):
    decode = detail.decode
    return statistics.median(decode.long_times_s) * 1000 if decode and decode.long_times_s else None


LONG_REPLY = Declared(
    key="long_reply_median_ms",
    label="Long reply, median (ms)",
    unit="ms",
    compute_with=long_reply_ms,
    better="lower",
    compared="difference",
    stored=False,
)
"""


def test_a_figure_compared_by_its_difference_gets_differences_not_ratios(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Declared `compared="difference"` and not stored: computed from the files' records at
    `combine` time, B − A in the row (its ratios null), `+…` in the terminal and the report; the
    other rows keep their shape (no `differences` key)."""
    (tmp_path / "long_reply_figure.py").write_text(DIFFERENCE)
    info = tmp_path / "long_reply_figure-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: long-reply-figure\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[sagemeter.figures]\nlong_reply_median_ms = long_reply_figure:LONG_REPLY\n"
    )
    run = tmp_path / "run"
    shutil.copytree(FIXED_RUN, run)
    (run / "compare.json").unlink()
    a, b = run / "measure-smollm2-f32.json", run / "measure-smollm2-q4_1.json"
    expected = [
        statistics.median(load_result(path).detail.decode.long_times_s) * 1000  # type: ignore[union-attr]
        for path in (a, b)
    ]
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.reset()
    try:
        out = tmp_path / "compare.json"
        done = CliRunner().invoke(
            _app(), ["combine", str(out), str(a), str(b)], env={"COLUMNS": "200"}
        )
        assert done.exit_code == 0, done.output
        rows = json.loads(out.read_text())["rows"]
        row = next(r for r in rows if r["key"] == "long_reply_median_ms")
        assert row["values"] == pytest.approx(expected)
        assert row["differences"] == pytest.approx([expected[1] - expected[0]])
        assert row["ratios"] == [None] and row["ratio_flags"] == [None]
        assert all("differences" not in r for r in rows if r is not row)
        shown = f"{expected[1] - expected[0]:+.3g}"
        assert shown.startswith("-") and shown in done.output

        (run / "measure-smollm2-f32-again.json").unlink()
        done = CliRunner().invoke(_app(), ["report", str(run), "--format", "md"])
        assert done.exit_code == 0, done.output
        line = next(
            line
            for line in (run / "report.md").read_text().splitlines()
            if "Long reply, median (ms)" in line
        )
        assert line.rstrip(" |").endswith(shown), line
    finally:
        monkeypatch.undo()
        registry.reset()


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_the_mcp_measure_reply_carries_an_installed_figure(
    installed: None, tmp_path: Path
) -> None:
    with running_truth_server(TRUTH) as url:
        async with Client(build_server(ServerConfig(results_dir=tmp_path))) as client:
            arguments = {"target": url, "quick": True, "decode_repeats": 3, "long_tokens": 24}
            arguments |= {"questions_per_family": 1, "quality_max_tokens": 8}  # not checked here
            answer = await client.call_tool("measure_endpoint", arguments)
    reply = ok(answer)
    truth = 1 / TRUTH.itl_s
    assert 0.8 * truth <= reply[KEY] <= 1.1 * truth, reply[KEY]
    assert reply["decode_tokens_per_second"] == pytest.approx(truth, rel=0.15)
    assert LABEL in text_of(answer)
