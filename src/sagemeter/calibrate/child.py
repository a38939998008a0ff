"""The known-truth server in a child process, so its CPU is its own and never the client's."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from sagemeter.calibrate.answers import WrongShares
from sagemeter.calibrate.faults import Faults
from sagemeter.calibrate.timing import TruthTiming
from sagemeter.parentwatch import PARENT_ENV, child_env
from sagemeter.parentwatch import die_with_parent as watch_parent

START_TIMEOUT_S = 30.0


def die_with_parent(parent_pid: int) -> None:
    """In the server: end when the process that started it ends, even if it was killed.

    A killed test run or benchmark must not leave a server behind on the machine. The one
    mechanism every child uses (`sagemeter.parentwatch`): the kernel's signal when the parent
    was on its main thread, and a watch of the parent pid always (a parent that started the
    server from another thread would otherwise kill it when that thread ended, or never).
    """
    os.environ.setdefault(PARENT_ENV, str(parent_pid))
    watch_parent(signal.SIGTERM)


def _wait_for_port(process: subprocess.Popen[bytes], pipe: int) -> int:
    """The port the server writes to its end of `pipe` once it listens."""
    deadline = time.monotonic() + START_TIMEOUT_S
    line = b""
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([pipe], [], [], min(left, 0.05))[0]:
            if process.poll() is not None:
                break
            continue
        chunk = os.read(pipe, 64)
        line += chunk
        if line.endswith(b"\n"):
            return int(line)
        if not chunk:  # the server closed its end without a port: it is ending
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.0, min(left, 5.0)))
            break
    if process.poll() is not None:
        code = process.returncode
        raise RuntimeError(f"the known-truth server exited at start (code {code})")
    raise RuntimeError(f"the known-truth server did not start within {START_TIMEOUT_S:.0f} s")


@contextlib.contextmanager
def running_truth_server(
    timing: TruthTiming,
    batch_gap_s: float | None = None,
    faults: Faults | None = None,
    max_model_len: int | None = None,
    slots: int | None = None,
    arrival_log: Path | None = None,
    wrong: WrongShares | None = None,
) -> Iterator[str]:
    """Start the server on 127.0.0.1, yield its base URL (no /v1), stop it on exit.

    `batch_gap_s` overrides how long a token between the first and the end may wait to share a
    wake-up with others (see `sagemeter.calibrate.scheduler`); `faults` make it misbehave;
    `max_model_len` gives it a context length (said in /v1/models, enforced); `slots` serves at
    most that many generations at once; `arrival_log` gets a JSON line per generation; `wrong`
    makes it answer known quality questions with those shares wrong (calibrate/answers.py).
    """
    reading, writing = os.pipe()  # the port comes back on a pipe: no file to leave behind
    command = [
        sys.executable,
        "-m",
        "sagemeter.calibrate.server",
        f"--ttft={timing.ttft_s!r}",
        f"--itl={timing.itl_s!r}",
        f"--port-fd={writing}",
        f"--parent-pid={os.getpid()}",
    ]
    if timing.prefill_s:
        command.append(f"--prefill={timing.prefill_s!r}")
    if timing.prefix_cache:
        command.append("--prefix-cache")
    if max_model_len is not None:
        command.append(f"--max-model-len={max_model_len}")
    if slots is not None:
        command.append(f"--slots={slots}")
    if arrival_log is not None:
        command.append(f"--arrival-log={arrival_log}")
    if batch_gap_s is not None:
        command.append(f"--batch-gap={batch_gap_s!r}")
    if faults is not None:
        command += faults.args()
    if wrong is not None:
        command += wrong.args()
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            env=child_env(os.environ.copy()),
            pass_fds=(writing,),
        )
    except BaseException:
        os.close(reading)
        raise
    finally:
        os.close(writing)
    try:
        try:
            port = _wait_for_port(process, reading)
        finally:
            os.close(reading)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
