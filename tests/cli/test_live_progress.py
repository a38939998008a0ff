"""Progress on long waits: `load` shows elapsed / duration and requests done on stderr (stdout
keeps the result), the measure bars show an ETA, and an engine's start-up line names the last
line of its log."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from rich.progress import TimeRemainingColumn

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.cli.common import new_progress
from sagemeter.cli.live import LiveRuns, progress_line, progress_mode
from sagemeter.engines.waiting import last_log_line, wait_line
from sagemeter.errors import UserError
from sagemeter.loadgen.loadrun import run_once
from sagemeter.loadgen.settings import LoadSettings

LINE = re.compile(
    r"^2 at once: (\d+\.\d)/(?:0\.6|1\.2) s(, finishing the requests in flight)?, (\d+) requests done$"
)


@pytest.fixture(scope="module")
def truth_url() -> Iterator[str]:
    with running_truth_server(TruthTiming(ttft_s=0.02, itl_s=0.01)) as url:
        yield url


def test_a_run_counts_the_requests_its_workers_finish_while_it_goes(truth_url: str) -> None:
    out = io.StringIO()
    runs = LiveRuns(Console(file=out, force_terminal=False, width=200), "lines", every_s=0.2)
    settings = LoadSettings(target=truth_url, concurrency=2, max_tokens=4, duration_s=0.6)
    result = run_once(settings, time.perf_counter(), watch=runs)
    shown = [LINE.match(line) for line in out.getvalue().splitlines()]
    assert len(shown) >= 3 and all(shown), out.getvalue()
    counts = [int(match[3]) for match in shown if match]
    assert counts == sorted(counts) and counts[1] > 0  # counted while the run went on
    assert counts[-1] == result.requests_completed + result.requests_failed


@pytest.mark.slow
def test_load_shows_progress_on_stderr_and_stdout_keeps_the_result(
    truth_url: str, sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sagemeter",
            "load",
            truth_url,
            "-c",
            "2",
            "--max-tokens",
            "4",
            "--duration",
            "1.2s",
            "--out",
            "r.json",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**sagemeter_env, "SAGEMETER_PROGRESS": "1", "COLUMNS": "200"},
        timeout=60,
        check=False,
    )
    # 3: the run was judged invalid (a busy host); the progress is what is checked here.
    assert done.returncode in (0, 3), done.stderr
    shown = [LINE.match(line) for line in done.stderr.splitlines() if "at once" in line]
    assert len(shown) >= 2 and all(shown), done.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert int(shown[-1][3]) == result["requests_completed"] + result["requests_failed"]
    assert "requests done" not in done.stdout and "output tokens/s" in done.stdout
    assert "wrote r.json" in done.stdout


def test_a_bad_progress_setting_is_one_line_before_any_work(
    sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sagemeter", "load", "http://127.0.0.1:1", "--duration", "1s"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**sagemeter_env, "SAGEMETER_PROGRESS": "loud"},
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: SAGEMETER_PROGRESS='loud': give 1 (always show progress), 0 (never) or auto"
    ]


def test_progress_mode_follows_the_setting_and_the_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    piped = Console(file=io.StringIO(), force_terminal=False)
    terminal = Console(file=io.StringIO(), force_terminal=True)
    monkeypatch.delenv("SAGEMETER_PROGRESS", raising=False)
    assert (progress_mode(piped), progress_mode(terminal)) == ("off", "bar")
    monkeypatch.setenv("SAGEMETER_PROGRESS", "1")
    assert (progress_mode(piped), progress_mode(terminal)) == ("lines", "bar")
    monkeypatch.setenv("SAGEMETER_PROGRESS", "0")
    assert (progress_mode(piped), progress_mode(terminal)) == ("off", "off")
    monkeypatch.setenv("SAGEMETER_PROGRESS", "sometimes")
    with pytest.raises(UserError, match="SAGEMETER_PROGRESS"):
        progress_mode(piped)


def test_lines_count_what_the_workers_report_and_say_when_the_run_drains() -> None:
    assert progress_line("4 at once", 3.04, 10.0, 52) == "4 at once: 3/10 s, 52 requests done"
    assert progress_line("2 requests/s", 61.0, 60.0, None) == (
        "2 requests/s: 60/60 s, finishing the requests in flight"
    )
    out = io.StringIO()
    finished = [0]
    runs = LiveRuns(Console(file=out, force_terminal=False, width=200), "lines")
    with runs.watching("1 at once", 0.3, lambda: finished[0]):
        finished[0] = 3
        time.sleep(0.05)
    lines = out.getvalue().splitlines()
    assert lines[0] == "1 at once: 0.0/0.3 s, 0 requests done"
    assert lines[-1].startswith("1 at once: 0.") and lines[-1].endswith(", 3 requests done")
    silent = io.StringIO()
    with LiveRuns(Console(file=silent), "off").watching("1 at once", 1.0, None):
        pass
    assert silent.getvalue() == ""


def test_the_measure_bars_show_an_estimate_of_the_time_left() -> None:
    assert any(isinstance(column, TimeRemainingColumn) for column in new_progress().columns)


def test_the_start_up_line_names_the_last_line_of_a_log_being_written(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    assert wait_line("starting vLLM", 3.2, log) == "starting vLLM: 3 s"  # no log yet
    log.write_text("")
    assert last_log_line(log) is None
    writer_done = threading.Event()

    def write() -> None:
        with log.open("a") as handle:
            handle.write("INFO loading weights\n\n")
            handle.flush()
            writer_done.set()

    threading.Thread(target=write).start()
    assert writer_done.wait(5)
    assert wait_line("starting vLLM", 42.4, log) == "starting vLLM: 42 s; log: INFO loading weights"
    with log.open("a") as handle:  # a tqdm bar redraws with carriage returns, in colour
        handle.write("Loading shards:  50%|#####  | 1/2\rLoading shards: 100%|##########| 2/2\r")
        handle.write("\x1b[32mINFO\x1b[0m compiling graph \x1b]0;title\x07\n")
    assert last_log_line(log) == "INFO compiling graph \\x1b]0;title\\x07"
    with log.open("a") as handle:
        handle.write("x" * 10_000 + "\n")  # only the tail is read, and the line is cut
    line = last_log_line(log)
    assert line is not None and len(line) == 120 and line.endswith("…")
