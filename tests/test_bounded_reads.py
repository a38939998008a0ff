"""Bounded reads: a FIFO or a device is refused in one line, a file past its cap too, and a
start time more than a day away; each before any work starts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from sagemeter.errors import UserError
from sagemeter.textfiles import read_capped
from tests import cli_run

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")


def _sagemeter(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return cli_run.invoke(args, {**os.environ, "SAGEMETER_HOME": str(cwd / "home")}, cwd)


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match=r"pipe: is a named pipe \(FIFO\), not a regular file"):
        read_capped(fifo, 1 << 20)


def test_a_device_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--server-log /dev/zero: is a device"):
        read_capped(Path("/dev/zero"), 1 << 20, "--server-log")


def test_a_file_past_its_cap_is_refused_and_one_within_is_read(tmp_path: Path) -> None:
    big = tmp_path / "big.log"
    big.write_bytes(b"x" * (3 << 20))
    with pytest.raises(UserError, match=r"big.log: is 3.0 MiB, more than the 2 MiB read"):
        read_capped(big, 2 << 20)
    assert read_capped(big, 3 << 20) == b"x" * (3 << 20)


def test_server_log_from_dev_zero_and_a_fifo_are_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "log"
    os.mkfifo(fifo)
    for log, says in (("/dev/zero", "is a device"), (str(fifo), "is a named pipe")):
        done = _sagemeter("measure", "out", "http://127.0.0.1:9", "--server-log", log, cwd=tmp_path)
        assert says in _one_error_line(done)


def test_a_plan_that_is_a_fifo_is_one_line(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "plan.toml")
    done = _sagemeter("run", "plan.toml", "--dry-run", cwd=tmp_path)
    assert "plan.toml: is a named pipe (FIFO)" in _one_error_line(done)


def test_a_question_set_that_is_a_device_is_one_line(tmp_path: Path) -> None:
    done = _sagemeter("questions", "/dev/zero", cwd=tmp_path)
    assert "/dev/zero" in _one_error_line(done)


def test_start_at_more_than_a_day_ahead_is_refused(tmp_path: Path) -> None:
    done = _sagemeter("load", "http://127.0.0.1:9", "--start-at", "99999999999", cwd=tmp_path)
    assert "give a start within a day" in _one_error_line(done)
