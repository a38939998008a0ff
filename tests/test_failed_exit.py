"""A failed job never exits 0: every command that measured, compared or reported less than it
was asked for says so on one line and exits 3 (EXIT_INCOMPLETE), its files still written.

`load` against a server that fails every request and `measure` against one that dies after its
first answers are real runs against the known-truth server; `combine` and `report` read the
reference run with one result marked incomplete, as a measure whose server died writes it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.faults import Faults
from sagemeter.errors import EXIT_INCOMPLETE
from tests.test_outputs import APP  # every command, as `sagemeter` registers them

RUN = Path(__file__).parent / "data" / "report-run"
FILES = ("measure-smollm2-f32.json", "measure-smollm2-q4_1.json", "measure-smollm2-f32-again.json")


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(APP, list(args))
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), result.exception
    return result.exit_code, result.output


@pytest.fixture
def run_with_an_incomplete_arm(tmp_path: Path) -> Path:
    """The reference run, its second arm's result marked incomplete with the reason a measure
    whose server died gives."""
    folder = tmp_path / "run"
    shutil.copytree(RUN, folder)
    path = folder / FILES[1]
    payload = json.loads(path.read_text())
    payload["complete"] = False
    payload["incomplete_because"] = ["decode rate: no decode rate: the server died"]
    path.write_text(json.dumps(payload))
    return folder


@pytest.fixture(scope="module")
def failing_url() -> Iterator[str]:
    with running_truth_server(TruthTiming(0.005, 0.001), faults=Faults(fail_every=1)) as url:
        yield url


def test_combine_of_an_incomplete_result_writes_it_and_exits_3(
    run_with_an_incomplete_arm: Path, tmp_path: Path
) -> None:
    out = tmp_path / "compare.json"
    files = [str(run_with_an_incomplete_arm / name) for name in FILES]
    code, output = invoke("combine", str(out), *files)
    assert code == EXIT_INCOMPLETE, output
    assert "incomplete: smollm2-q4_1 incomplete" in output
    assert json.loads(out.read_text())["incomplete"][1]  # written, and it says so


def test_combine_of_complete_results_exits_0(tmp_path: Path) -> None:
    code, output = invoke("combine", str(tmp_path / "c.json"), *(str(RUN / n) for n in FILES))
    assert code == 0, output
    assert "incomplete" not in output


def test_report_of_a_run_with_an_incomplete_arm_writes_it_and_exits_3(
    run_with_an_incomplete_arm: Path,
) -> None:
    code, output = invoke("report", str(run_with_an_incomplete_arm), "--format", "md")
    assert code == EXIT_INCOMPLETE, output
    assert output.strip().splitlines()[-1].startswith("incomplete: smollm2-q4_1")
    assert (run_with_an_incomplete_arm / "report.md").is_file()


def test_load_whose_every_request_failed_exits_3(failing_url: str, tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    code, output = invoke(
        "load",
        failing_url,
        "-c",
        "2",
        "--duration",
        "300ms",
        "--max-tokens",
        "4",
        "--out",
        str(out),
    )
    assert code == EXIT_INCOMPLETE, output
    assert "every request failed" in output
    assert out.is_file()


def test_measure_whose_server_died_exits_3(tmp_path: Path) -> None:
    with running_truth_server(TruthTiming(0.005, 0.001), faults=Faults(die_after=3)) as url:
        code, output = invoke("measure", str(tmp_path / "m"), url, "--quick")
    assert code == EXIT_INCOMPLETE, output
    assert "incomplete:" in output
    assert list((tmp_path / "m").glob("measure-*.json"))
