"""Nothing left running: a killed or hung-up command's workers stop sending at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.parentwatch import child_env
from tests.truth_stats import truth_requests

LOAD = [sys.executable, "-m", "sagemeter", "load"]


@pytest.fixture(scope="module")
def truth_url() -> Iterator[str]:
    with running_truth_server(TruthTiming(0.01, 0.002)) as url:
        yield url


def _children(pid: int) -> set[int]:
    """The pids whose parent is `pid` (Linux /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start_load(url: str, home: Path) -> tuple[subprocess.Popen[str], set[int]]:
    """`sagemeter load` for a minute with two workers; returns once they are sending."""
    before = truth_requests(url)
    process = subprocess.Popen(
        [*LOAD, url, "-c", "4", "--workers", "2", "--duration", "60s", "--max-tokens", "8"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SAGEMETER_HOME": str(home)},
    )
    deadline = time.monotonic() + 20
    while truth_requests(url) <= before + 10:
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    workers = _children(process.pid)
    assert len(workers) == 2
    return process, workers


def _assert_stops_sending(url: str, workers: set[int]) -> None:
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in workers):
        assert time.monotonic() < deadline, "a worker outlived its parent"
        time.sleep(0.05)
    time.sleep(0.2)  # replies in flight when the workers died
    settled = truth_requests(url)
    time.sleep(0.5)
    assert truth_requests(url) == settled


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigkill_of_load_leaves_no_worker_sending(truth_url: str, tmp_path: Path) -> None:
    process, workers = _start_load(truth_url, tmp_path)
    process.kill()
    process.communicate(timeout=5)
    _assert_stops_sending(truth_url, workers)


SLEEPER = (
    "import time; from sagemeter.parentwatch import die_with_parent; "
    "die_with_parent(); print('up', flush=True); time.sleep(60)"
)


def _sleeper(env: dict[str, str]) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE, text=True, env=env
    )
    assert child.stdout is not None and child.stdout.readline() == "up\n"
    return child


def test_a_child_started_from_a_thread_outlives_the_thread() -> None:
    """The kernel's parent-death signal follows the starting thread; it must not be used then."""
    started: list[subprocess.Popen[str]] = []
    thread = threading.Thread(target=lambda: started.append(_sleeper(child_env(dict(os.environ)))))
    thread.start()
    thread.join()
    time.sleep(0.5)
    child = started[0]
    try:
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_liveness_check_ends_a_child_whose_parent_was_killed() -> None:
    """Without the kernel's help (a child started off the main thread) the watch still works."""
    middle = subprocess.Popen(
        [sys.executable, "-c", MIDDLE], stdout=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    assert middle.stdout is not None
    grandchild = int(middle.stdout.readline())
    middle.kill()
    middle.wait()
    deadline = time.monotonic() + 3
    while _alive(grandchild):
        assert time.monotonic() < deadline, "the child outlived its parent"
        time.sleep(0.05)


# The middle process marks the child without the kernel's signal, prints its pid and waits.
MIDDLE = f"""
import os, subprocess, sys, time
from sagemeter.parentwatch import DEATHSIG_ENV, child_env
env = {{**child_env(dict(os.environ)), DEATHSIG_ENV: "0"}}
child = subprocess.Popen([sys.executable, "-c", {SLEEPER!r}], stdout=subprocess.PIPE, env=env)
child.stdout.readline()
print(child.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_end_load_like_ctrl_c(
    truth_url: str, tmp_path: Path, signum: int, code: int
) -> None:
    process, workers = _start_load(truth_url, tmp_path)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=5)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    assert lines[-1].startswith("interrupted while"), stderr
    _assert_stops_sending(truth_url, workers)


RUN_PLAN = """name = "hangup"
[measure]
short-tokens = 4
long-tokens = 400
repeats = 2
levels = [1]
load-tokens = 8
batches = 1
questions-per-family = 1
quality-max-tokens = 8

[[arm]]
name = "a"
target = "{url}"

[[arm]]
name = "b"
target = "{url}"
"""


def test_sighup_stops_run_and_leaves_the_journal_stopped(truth_url: str, tmp_path: Path) -> None:
    """A closed terminal is a stop like Ctrl-C: the journal says stopped, exit 129."""
    (tmp_path / "plan.toml").write_text(RUN_PLAN.format(url=truth_url))
    journal = tmp_path / "run" / "journal.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "sagemeter", "run", "plan.toml", "--out", "run"],
        cwd=tmp_path,
        env={**os.environ, "SAGEMETER_HOME": str(tmp_path / "home"), "COLUMNS": "200"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while not (journal.exists() and '"running"' in journal.read_text()):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    time.sleep(0.3)
    process.send_signal(signal.SIGHUP)
    _, stderr = process.communicate(timeout=10)
    assert process.returncode == 129, stderr
    assert "Traceback" not in stderr and "stopped: SIGHUP" in stderr
    state = json.loads(journal.read_text())
    assert state["state"] == "stopped"
    assert all(step["state"] != "running" for step in state["steps"])
