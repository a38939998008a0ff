"""Ctrl-C says what was interrupted and what was kept, then exits 130; nothing half-written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sagemeter.atomic import write_text_atomic
from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.cli import interrupt as activity


@pytest.mark.slow
def test_ctrl_c_during_measure_says_so_and_leaves_no_file(tmp_path: Path) -> None:
    env = {**os.environ, "SAGEMETER_HOME": str(tmp_path / "home")}
    out = tmp_path / "run"
    with running_truth_server(TruthTiming(0.05, 0.01)) as url:
        process = subprocess.Popen(
            [sys.executable, "-m", "sagemeter", "measure", str(out), url, "--long-tokens", "400"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        deadline = time.monotonic() + 60
        while not out.exists() and time.monotonic() < deadline:  # the checks ran, work began
            time.sleep(0.1)
        time.sleep(1.0)  # well inside the measure: one 400-token reply alone takes 4 s
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert lines[-1].startswith(f"interrupted while measuring {url}/v1 into {out}")
    assert lines[-1].endswith("nothing was written; nothing half-written was left")
    # No result file; the folder measure made is removed too, since nothing was written in it.
    assert not out.exists() or not list(out.glob("measure-*"))


def test_the_message_lists_the_files_kept(tmp_path: Path) -> None:
    activity.reset()  # other tests of this process wrote files too
    activity.doing("running the demo into runs/x")
    for name in ("measure-a.json", "measure-b.json"):
        write_text_atomic(tmp_path / name, "{}\n")
    message = activity.interrupted_message()
    assert message.startswith("interrupted while running the demo into runs/x: kept 2 finished")
    assert str(tmp_path / "measure-a.json") in message and "nothing half-written" in message
