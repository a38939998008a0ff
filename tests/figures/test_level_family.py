"""A level family (figures keyed by a level) declared once: sagemeter's own give the comparison's
load, long-prompt and cost rows; a plug-in's, installed as a distribution on disk, is computed
from the records into the result's top level and gets a row per level in `combine`, beside the
load rows, and in the terminal, the report and the MCP text, with no other code changed.

Truth: the fixed run's files hold each load level's first-token waits; the plug-in's figure is
the slowest of them in ms, so each row's values are those files' own maxima.
"""

from __future__ import annotations

import importlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from sagemeter.figures import level_figure_of, level_figures, problems, registry
from sagemeter.figures.builtin_levels import LOAD, LOAD_COST, LONG_PROMPT_TTFT_P50
from sagemeter.figures.declaration import level_key, level_label, level_of_key
from sagemeter.mcp.measure_tools import measure_text
from sagemeter.report.figures import num
from sagemeter.results import load_result
from tests.report_parse import FIXED_RUN

FILES = ("measure-smollm2-f32.json", "measure-smollm2-q4_1.json")
FAMILY = "load_ttft_max_ms"
PLUGIN = """\
from sagemeter.figures import LevelFigure


def slowest_first_token(detail):
    load = detail.load
    if load is None:
        return None
    return {
        str(level.concurrency): level.ttft_s.max * 1000 if level.ttft_s else None
        for level in load.levels
    }


TTFT_MAX = LevelFigure(
    name="load_ttft_max_ms",
    key_template="load_c{level}_ttft_max_ms",
    label_template="{level} at once, slowest first token (ms)",
    level_name="concurrency",
    level_unit="requests at once",
    unit="ms",
    better="lower",
    group="load",
    compute_with=slowest_first_token,
)
BROKEN = LevelFigure(
    name="load_broken_ms",
    key_template="load_c{level}_broken_ms",
    label_template="{level} at once, broken (ms)",
    level_name="concurrency",
    level_unit="requests at once",
    unit="ms",
    compute_with=lambda detail: {"1": 1 / 0},
)
NO_LEVEL = LevelFigure(
    name="no_level",
    key_template="no_level_ms",
    label_template="{level} at once",
    level_name="concurrency",
    level_unit="requests at once",
    unit="ms",
)
"""


def _app() -> typer.Typer:
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.callback()
    def _group() -> None:
        pass

    for name in ("sagemeter.cli.combine", "sagemeter.cli.report"):
        importlib.import_module(name).register(app)
    return app


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The plug-in's distribution on the path (one good family, one without {level})."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "ttft_levels.py").write_text(PLUGIN)
    info = site / "ttft_levels-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ttft-levels\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[sagemeter.figures]\n{FAMILY} = ttft_levels:TTFT_MAX\nno_level = ttft_levels:NO_LEVEL\n"
        "load_broken_ms = ttft_levels:BROKEN\n"
    )
    monkeypatch.syspath_prepend(str(site))
    registry.reset()
    yield site
    monkeypatch.undo()
    registry.reset()


def test_a_row_key_names_its_family_and_level() -> None:
    assert level_key(LOAD, 16) == "load_c16_tokens_per_second"
    assert level_figure_of("load_c16_tokens_per_second") == (LOAD, "16")
    assert level_figure_of("usd_per_million_tokens_c4") == (LOAD_COST, "4")
    assert level_figure_of("long_prompt_c4_ttft_p50_ms") == (LONG_PROMPT_TTFT_P50, "4")
    for other in ("load_seconds", "load_c_tokens_per_second", "load_cx_tokens_per_second"):
        assert level_of_key(LOAD, other) is None
        assert level_figure_of(other) is None
    assert level_label(LOAD, 4) == "4 at once (tokens/s)"


def test_a_plugin_family_is_computed_compared_and_shown_per_level(
    installed: Path, tmp_path: Path
) -> None:
    assert problems() == [
        "the figure plug-in 'no_level': its key and label templates need one {level}; it is "
        "left out (see docs/extending.md)"
    ]
    names = [family.name for family in level_figures()]
    assert names == [*registry.BUILT_IN_LEVELS, "load_broken_ms", FAMILY]
    run = tmp_path / "run"
    run.mkdir()
    expected = []
    for name in FILES:
        result = load_result(FIXED_RUN / name)
        assert result.detail is not None and result.detail.load is not None
        truth = {
            str(lv.concurrency): round(lv.ttft_s.max * 1000, 3)
            for lv in result.detail.load.levels
            if lv.ttft_s is not None
        }
        assert set(truth) == {"1", "4"}
        computed, warnings = registry.top_level_levels(result.detail)
        # A computation that raises is no figure: one warning, no key.
        assert computed == {FAMILY: truth}
        assert warnings == [
            "figure load_broken_ms: not computed (ZeroDivisionError: division by zero)"
        ]
        payload = json.loads((FIXED_RUN / name).read_text())
        (run / name).write_text(json.dumps({**payload, **computed}))
        expected.append(truth)
        text = measure_text(load_result(run / name), run / name)
        assert f"4 at once, slowest first token (ms) {num(truth['4'])}" in text

    out = tmp_path / "compare.json"
    files = [str(run / name) for name in FILES]
    done = CliRunner().invoke(_app(), ["combine", str(out), *files], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    rows = json.loads(out.read_text())["rows"]
    keys = [row["key"] for row in rows]
    start = keys.index("load_c1_tokens_per_second")
    assert keys[start : start + 4] == [
        "load_c1_tokens_per_second",
        "load_c1_ttft_max_ms",
        "load_c4_tokens_per_second",
        "load_c4_ttft_max_ms",
    ]
    row = rows[start + 3]
    assert row["kind"] == "figure"
    assert row["values"] == [expected[0]["4"], expected[1]["4"]]
    assert row["ratios"] == [pytest.approx(expected[1]["4"] / expected[0]["4"])]
    assert "load_c4_ttft_max_ms" in done.output  # the terminal table's row

    shutil.copy(FIXED_RUN / "measure-smollm2-f32-again.json", run)
    done = CliRunner().invoke(_app(), ["report", str(run), "--format", "md"])
    assert done.exit_code == 0, done.output
    report = (run / "report.md").read_text()
    line = next(line for line in report.splitlines() if "4 at once, slowest first token" in line)
    assert num(expected[0]["4"]) in line and num(expected[1]["4"]) in line, line
