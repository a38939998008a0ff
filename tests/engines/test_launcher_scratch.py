"""The launcher's scratch folder: a server's private temporary files, gone however it ended.

vLLM leaves its inter-process sockets and a file store in the temporary folder at every start;
sagemeter's launcher gives it a private one (`--scratch-env TMPDIR`) and removes it once the
server's group is gone. Here a small script stands in for the server: it writes a file into
the folder it was given, says where, and then waits or ends.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, cast

import pytest

from sagemeter.engines.launcher import STOP

SERVER = """
import os, pathlib, sys, time
scratch = pathlib.Path(os.environ["SCRATCH"])
(scratch / "engine.sock").write_text("")
print(scratch, flush=True)
if sys.argv[1] == "wait":
    time.sleep(60)
"""


def _launch(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[str], Path, Path]:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sagemeter.engines.launcher",
            "--grace",
            "5",
            "--scratch-env",
            "SCRATCH",
            sys.executable,
            "-c",
            SERVER,
            mode,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(temporary)},
        start_new_session=True,
    )
    scratch = Path(cast(IO[str], launcher.stdout).readline().strip())
    return launcher, scratch, temporary


@pytest.mark.parametrize("ended_by", ["asked", "sagemeter gone", "SIGTERM", "itself"])
def test_the_scratch_folder_is_private_and_removed_however_the_server_ends(
    tmp_path: Path, ended_by: str
) -> None:
    launcher, scratch, temporary = _launch(tmp_path, "exit" if ended_by == "itself" else "wait")
    assert scratch.parent == temporary and (scratch / "engine.sock").exists()
    assert scratch.stat().st_mode & 0o777 == 0o700  # the user's own
    stdin = cast(IO[str], launcher.stdin)
    if ended_by == "asked":
        stdin.write(STOP.decode())
        stdin.close()
    elif ended_by == "sagemeter gone":
        stdin.close()
    elif ended_by == "SIGTERM":
        launcher.send_signal(signal.SIGTERM)
    launcher.wait(timeout=30)
    assert not scratch.exists()
    assert list(temporary.iterdir()) == []


def test_without_scratch_env_the_server_keeps_the_callers_temporary_folder(
    tmp_path: Path,
) -> None:
    """A `cmd:` server's temporary files are its own business: no variable is set for it."""
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sagemeter.engines.launcher",
            sys.executable,
            "-c",
            "import os; print(os.environ.get('SCRATCH', 'unset'))",
        ],
        stdin=subprocess.PIPE,  # open: a closed stdin would mean sagemeter is gone
        stdout=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "SCRATCH"},
        start_new_session=True,
    )
    said = cast(IO[str], launcher.stdout).read()
    assert launcher.wait(timeout=30) == 0 and said.strip() == "unset"
