"""Stopped from outside, every command stops everything it started, at once, with its code.

Real processes against a known-truth server: each command is stopped once the server has seen
its requests, by SIGKILL, by SIGTERM, or by SIGHUP after its terminal has gone (stdio on a
pseudo-terminal whose other end is closed first, so every later write fails as it does when an
SSH session drops). Afterwards the server's own request count must stand still, every process
the command had started must be gone, the exit code must say which signal it was (143, 129), a
run's journal must say "stopped", not "running" or "failed", and the command's temporary folder
(TMPDIR, its own per test) must hold nothing: not even SIGKILL may leave a file behind.
"""

from __future__ import annotations

import errno
import json
import os
import pty
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, cast

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.engines.ports import free_port
from tests.truth_stats import truth_requests

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

SAGEMETER = [sys.executable, "-m", "sagemeter"]
EXIT = {"kill": -signal.SIGKILL, "term": 143, "hangup": 129}

PLAN = """name = "stops"
[measure]
short-tokens = 4
long-tokens = 400
repeats = 2
levels = [1, 2]
load-tokens = 8
batches = 2
questions-per-family = 1
quality-max-tokens = 8

[[arm]]
name = "a"
target = "{url}"

[[arm]]
name = "b"
target = "{url}"
"""


@pytest.fixture(scope="module")
def truth_url() -> Iterator[str]:
    with running_truth_server(TruthTiming(0.01, 0.002)) as url:
        yield url


def _parents() -> dict[int, int]:
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            table[int(entry.name)] = int(fields[1])
    return table


def descendants(pid: int) -> set[int]:
    """Every process below `pid` now (children, their children…)."""
    table, found, todo = _parents(), set(), [pid]
    while todo:
        parent = todo.pop()
        for child, its_parent in table.items():
            if its_parent == parent and child not in found:
                found.add(child)
                todo.append(child)
    return found


def own_tmpdir(folder: Path) -> dict[str, str]:
    """An environment whose temporary folder is `folder` (made empty here), to see what is left."""
    folder.mkdir()
    return {**os.environ, "TMPDIR": str(folder)}


def assert_empty(folder: Path) -> None:
    left = sorted(path.name for path in folder.iterdir())
    assert not left, f"left in the temporary folder: {left}"


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class Stopped:
    """A command started, stopped by `how` once `moment()` holds, and what it left."""

    def __init__(self, argv: list[str], cwd: Path, how: str, *, terminal: bool = False) -> None:
        self.how = how
        self.tmpdir = cwd / "tmp"
        env = {**own_tmpdir(self.tmpdir), "SAGEMETER_HOME": str(cwd / "home"), "COLUMNS": "200"}
        self.master: int | None = None
        if terminal:
            self.master, slave = pty.openpty()
            self.process = subprocess.Popen(
                [*SAGEMETER, *argv], stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env
            )
            os.close(slave)
        else:
            self.process = subprocess.Popen(
                [*SAGEMETER, *argv],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                text=True,
            )
        self.started: set[int] = set()
        self.stderr = ""

    def _drain_terminal(self) -> None:
        import select

        assert self.master is not None
        while select.select([self.master], [], [], 0)[0]:
            try:
                if not os.read(self.master, 65536):
                    return
            except OSError:
                return

    def stop_when(self, moment: Callable[[], bool], timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not moment():
            if self.master is not None:
                self._drain_terminal()
            assert self.process.poll() is None, self.process.communicate()
            assert time.monotonic() < deadline, "the moment never came"
            time.sleep(0.05)
        self.started |= descendants(self.process.pid)
        if self.how == "kill":
            self.process.kill()
        elif self.how == "term":
            self.process.send_signal(signal.SIGTERM)
        else:  # the terminal goes away, then the kernel's hang-up
            if self.master is not None:
                os.close(self.master)
            self.process.send_signal(signal.SIGHUP)
        if self.master is None:
            self.stderr = cast(str, self.process.communicate(timeout=60)[1])
        else:
            self.process.wait(timeout=60)

    def assert_nothing_left(self, url: str | None = None) -> None:
        assert self.process.returncode == EXIT[self.how], self.stderr
        assert "Traceback" not in self.stderr, self.stderr
        deadline = time.monotonic() + 3  # SIGKILL: the children see their parent gone
        while left := {pid for pid in self.started if alive(pid)}:
            assert time.monotonic() < deadline, f"left running after {self.how}: {left}"
            time.sleep(0.05)
        if url is not None:
            time.sleep(0.2)  # replies in flight when the last sender went
            settled = truth_requests(url)
            time.sleep(0.6)
            assert truth_requests(url) == settled, "something kept sending"
        assert_empty(self.tmpdir)


def _sending(url: str, more: int) -> Callable[[], bool]:
    floor = truth_requests(url) + more
    return lambda: truth_requests(url) >= floor


STOPS = [
    pytest.param("kill", False, id="SIGKILL"),
    pytest.param("term", False, id="SIGTERM"),
    pytest.param("hangup", True, id="SIGHUP-terminal-gone"),
]


# Slow: real processes stopped by each signal, about 4 s each; the fast tier keeps one of each
# kind for `load` and `run` (tests/test_lifecycle.py).
@pytest.mark.slow
@pytest.mark.parametrize(("how", "terminal"), STOPS)
@pytest.mark.parametrize("command", ["load", "measure"])
def test_a_stopped_load_or_measure_leaves_nothing_sending(
    truth_url: str, tmp_path: Path, command: str, how: str, terminal: bool
) -> None:
    argv = {
        "load": ["load", truth_url, "-c", "4", "--workers", "2", "--duration", "60s"],
        # --quick: after 2 preflight and 5 decode requests its tenth is a parallel batch's, sent
        # by a worker process, in about a second (the default lengths took four to get there).
        "measure": ["measure", str(tmp_path / "out"), truth_url, "--quick"],
    }[command]
    stopped = Stopped(argv, tmp_path, how, terminal=terminal)
    stopped.stop_when(_sending(truth_url, 10))
    stopped.assert_nothing_left(truth_url)
    if how == "term":
        assert stopped.stderr.strip().splitlines()[-1].startswith("interrupted while")


@pytest.mark.slow  # a whole plan's processes stopped by each signal
@pytest.mark.parametrize(("how", "terminal"), STOPS)
def test_a_stopped_run_leaves_nothing_sending_and_its_journal_stopped(
    truth_url: str, tmp_path: Path, how: str, terminal: bool
) -> None:
    (tmp_path / "plan.toml").write_text(PLAN.format(url=truth_url))
    journal = tmp_path / "run" / "journal.json"
    stopped = Stopped(["run", "plan.toml", "--out", "run"], tmp_path, how, terminal=terminal)
    sending = _sending(truth_url, 10)
    stopped.stop_when(lambda: journal.exists() and sending())
    stopped.assert_nothing_left(truth_url)
    state = json.loads(journal.read_text())
    if how == "kill":  # nothing could say so: --resume takes it from the journal as it is
        assert state["state"] == "running"
        return
    assert state["state"] == "stopped", state
    assert all(step["state"] != "running" for step in state["steps"]), state["steps"]


def _call(process: subprocess.Popen[bytes], message: dict[str, object]) -> None:
    stdin = cast(IO[bytes], process.stdin)
    stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
    stdin.flush()


@pytest.mark.slow  # a real `sagemeter mcp` and its calls' processes, about 6 s each
@pytest.mark.parametrize("how", ["term", "hangup"])
@pytest.mark.parametrize("tool", ["measure_endpoint", "run_experiment"])
def test_the_mcp_server_stopped_by_a_signal_stops_its_calls(
    truth_url: str, tmp_path: Path, tool: str, how: str
) -> None:
    """A supervisor's SIGTERM (or a hang-up) to `sagemeter mcp` cancels its calls as a client's
    cancel would: a run ends 'stopped', nothing keeps sending, the exit code names the signal."""
    results = tmp_path / "results"
    process = subprocess.Popen(
        [*SAGEMETER, "mcp", "--results-dir", str(results)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**own_tmpdir(tmp_path / "tmp"), "SAGEMETER_HOME": str(tmp_path / "home")},
    )
    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    _call(process, {"id": 1, "method": "initialize", "params": hello})
    assert b'"result"' in cast(IO[bytes], process.stdout).readline()
    _call(process, {"method": "notifications/initialized"})
    arguments = {
        "measure_endpoint": {"target": truth_url + "/v1", "name": "m"},
        "run_experiment": {"plan": PLAN.format(url=truth_url)},
    }[tool]
    _call(
        process, {"id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    )
    sending = _sending(truth_url, 10)
    started: set[int] = set()
    deadline = time.monotonic() + 60
    while not sending():
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    started |= descendants(process.pid)
    process.send_signal(signal.SIGTERM if how == "term" else signal.SIGHUP)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == EXIT[how], stderr
    assert stderr.decode().strip().splitlines()[-1] == "stopped"
    time.sleep(0.2)
    assert not {pid for pid in started if alive(pid)}
    settled = truth_requests(truth_url)
    time.sleep(0.6)
    assert truth_requests(truth_url) == settled
    journals = list((results / "runs").glob("*/journal.json"))
    assert len(journals) == (1 if tool == "run_experiment" else 0)
    assert_empty(tmp_path / "tmp")
    for journal in journals:
        state = json.loads(journal.read_text())
        assert state["state"] == "stopped", state
        assert all(step["state"] != "running" for step in state["steps"])


# A process that starts the truth server (from its main thread or another), prints its pid, waits.
TRUTH_PARENT = """
import os, sys, threading, time
from sagemeter.calibrate import TruthTiming, running_truth_server

def serve():
    with running_truth_server(TruthTiming(0.01, 0.002)):
        me = os.getpid()
        for entry in os.listdir("/proc"):
            if entry.isdigit() and entry != str(me):
                try:
                    stat = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(stat[1]) == me:
                    print(entry, flush=True)
        time.sleep(60)
if sys.argv[1] == "thread":
    threading.Thread(target=serve, daemon=True).start()
    time.sleep(60)
else:
    serve()
"""


@pytest.mark.parametrize("started_from", ["main", "thread"])
def test_a_truth_server_dies_with_the_process_that_started_it(
    tmp_path: Path, started_from: str
) -> None:
    """`running_truth_server` (selfcheck's, the benchmarks'): a killed parent leaves no server,
    whichever thread started it (the kernel's signal follows the thread, the watch does not),
    and no file in its temporary folder."""
    parent = subprocess.Popen(
        [sys.executable, "-c", TRUTH_PARENT, started_from],
        stdout=subprocess.PIPE,
        text=True,
        env=own_tmpdir(tmp_path / "tmp"),
    )
    server = int(cast(IO[str], parent.stdout).readline())
    assert alive(server)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 3
    while alive(server):
        assert time.monotonic() < deadline, "the truth server outlived its parent"
        time.sleep(0.05)
    assert_empty(tmp_path / "tmp")


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_the_mcp_http_server_stops_on_a_signal_with_its_code(
    tmp_path: Path, signum: int, code: int
) -> None:
    """Over HTTP uvicorn takes SIGTERM itself and shuts down; the exit code still names it."""
    import socket

    port = free_port()
    process = subprocess.Popen(
        [*SAGEMETER, "mcp", "--http", str(port), "--results-dir", str(tmp_path / "results")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SAGEMETER_HOME": str(tmp_path / "home")},
    )
    deadline = time.monotonic() + 30
    while True:
        with socket.socket() as client:
            if client.connect_ex(("127.0.0.1", port)) == 0:
                break
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == code, stderr
    assert stderr.strip().splitlines()[-1] == "stopped"


class _Failing:
    """A text stream whose writes fail with `code` (EIO: the terminal has gone)."""

    def __init__(self, code: int) -> None:
        self.code = code

    def write(self, text: str) -> int:
        raise OSError(self.code, os.strerror(self.code))

    def flush(self) -> None:
        raise OSError(self.code, os.strerror(self.code))


@pytest.mark.parametrize("code", [errno.EIO, errno.EPIPE])
def test_writes_to_a_stream_that_has_gone_are_dropped_and_remembered(code: int) -> None:
    from sagemeter.cli.terminal import SurvivingStream

    stream = SurvivingStream(cast(IO[str], _Failing(code)))
    assert stream.write("a line\n") == len("a line\n")
    stream.flush()
    assert stream.gone == os.strerror(code)


def test_a_full_disk_behind_stdout_still_raises() -> None:
    """Only a reader that has gone is dropped; any other failure stays the command's error."""
    from sagemeter.cli.terminal import SurvivingStream

    stream = SurvivingStream(cast(IO[str], _Failing(errno.ENOSPC)))
    with pytest.raises(OSError):
        stream.write("x")
    assert stream.gone is None
