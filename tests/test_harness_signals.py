"""A process a test starts takes Ctrl-C, even when the test run was started as a background job.

A shell starts a background job (`make test &`, `cmd &` in a script or a subshell) with SIGINT
ignored, and everything under it inherits that: each Ctrl-C or `serve` test then sent SIGINT to a
`sagemeter` that ignored it, and failed at its timeout. tests/conftest.py undoes the ignore.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

NESTED = "SAGEMETER_TESTS_NESTED_RUN"  # the run below, started as a shell starts a background job
REPOSITORY = Path(__file__).resolve().parents[1]


def test_a_process_a_test_starts_takes_ctrl_c() -> None:
    code = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True", "a child of the tests starts with Ctrl-C ignored"


def _as_a_background_job() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.skipif(os.environ.get(NESTED) == "1", reason="the nested run itself")
def test_a_run_started_with_ctrl_c_ignored_still_gives_its_processes_ctrl_c() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            f"{Path(__file__).relative_to(REPOSITORY)}::test_a_process_a_test_starts_takes_ctrl_c",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        capture_output=True,
        text=True,
        cwd=REPOSITORY,
        env={**os.environ, NESTED: "1"},
        stdin=subprocess.DEVNULL,
        preexec_fn=_as_a_background_job,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
