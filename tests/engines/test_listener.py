"""A server sagemeter starts is taken as ready only when its port answers from the server.

- A port another program answers on before the server starts is refused before anything starts,
  for every engine that launches a server (`LaunchedServer`: `vllm:`, `cmd:`): bad input (exit
  2) when the user gave the port, as a server's own "address in use" is.
- A server that listens from its own processes (vLLM) is refused once its port answers from a
  program that ran before it: one that took the port while the server was still loading.

The other program is sagemeter's own truth server, which answers /health and lists a model as a
real server would; the server "started" is a script that never binds its port, as vLLM does not
for its first 40 s.
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from sagemeter.calibrate import wire
from sagemeter.calibrate.child import running_truth_server
from sagemeter.calibrate.timing import TruthTiming
from sagemeter.engines.command import CommandServer
from sagemeter.engines.hf_export import ServedModel
from sagemeter.engines.listener import REACHED_FROM_LOOPBACK, holder, other_listener
from sagemeter.engines.ports import free_port
from sagemeter.engines.vllm_install import VllmInstall
from sagemeter.engines.vllm_server import VllmServer
from sagemeter.errors import EngineError, InputError
from sagemeter.targets import CommandTarget, parse_target

TIMING = TruthTiming(ttft_s=0.01, itl_s=0.002)
PYTHON = shlex.quote(sys.executable)
NEVER_BINDS = "import time\ntime.sleep(60)\n"


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _listener_pid(port: int) -> int:
    (found,) = {
        c.pid
        for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
    }
    assert found is not None
    return found


def _running(script: Path) -> list[int]:
    """Processes (not yet reaped zombies aside) running `script`."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        if str(script) in (process.info["cmdline"] or []) and process.info["status"] != "zombie":
            found.append(process.pid)
    return found


def _none_left(script: Path) -> bool:
    deadline = time.monotonic() + 15
    while _running(script) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _running(script) == []


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])


def test_a_given_port_another_program_answers_on_is_refused_before_the_server_starts(
    tmp_path: Path,
) -> None:
    script = tmp_path / "server.py"
    script.write_text(NEVER_BINDS)
    with running_truth_server(TIMING) as url:
        port = _port(url)
        target = parse_target(f"cmd:{PYTHON} {shlex.quote(str(script))} {{port}}")
        assert isinstance(target, CommandTarget)
        server = CommandServer(target, log_path=tmp_path / "engine.log", port=port)
        with pytest.raises(InputError) as refused:
            server.start(timeout_s=30)
        holder_pid = _listener_pid(port)
        name = psutil.Process(holder_pid).name()
    assert str(refused.value) == (
        f"port {port} on 127.0.0.1 is already in use, by another program, pid {holder_pid} "
        f"({name}): give another port or stop that program"
    )
    assert not (tmp_path / "engine.log").exists()  # refused before anything started
    assert _running(script) == [] and not server.is_running()


def _vllm_standing_in(tmp_path: Path, signal_file: Path) -> VllmInstall:
    """A `vllm` executable that says it has started (`signal_file`), then loads for a minute
    without binding its port, as vLLM's imports do."""
    script = tmp_path / "vllm"
    script.write_text(
        f"#!{sys.executable}\nimport pathlib, time\n"
        f"pathlib.Path({str(signal_file)!r}).write_text('started')\ntime.sleep(60)\n"
    )
    script.chmod(0o755)
    return VllmInstall(executable=script, python=Path(sys.executable), origin="SAGEMETER_VLLM")


def _takes_the_port_once(signal_file: Path, port: int) -> subprocess.Popen[bytes]:
    """A program running already that binds `port` once the server has started: it waits for
    `signal_file`, then becomes the truth server in the same process (exec: same pid, same start
    time), listing the truth server's model."""
    waiting = signal_file.with_suffix(".waiting")
    waits = (
        "import os, pathlib, sys, time\n"
        f"pathlib.Path({str(waiting)!r}).write_text('waiting')\n"
        f"while not pathlib.Path({str(signal_file)!r}).exists(): time.sleep(0.02)\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'sagemeter', 'calibrate-server', "
        f"'--port', '{port}', '--ttft', '10ms', '--itl', '2ms'])\n"
    )
    process = subprocess.Popen([sys.executable, "-c", waits])
    # Running before the server starts, on the start-time clock too (its ticks are 10 ms).
    while not waiting.exists():
        time.sleep(0.02)
    return process


@pytest.mark.parametrize("given", [False, True], ids=["picked port", "given port"])
def test_vllm_is_refused_when_its_port_answers_from_a_program_that_ran_before_it(
    tmp_path: Path, given: bool
) -> None:
    signal_file = tmp_path / "started"
    install = _vllm_standing_in(tmp_path, signal_file)
    model = ServedModel(name=wire.MODEL_ID, folder=tmp_path, dtype="auto", description="none")
    port = free_port()
    server = VllmServer(model, install, log_path=tmp_path / "vllm.log", port=port if given else 0)
    if not given:
        port = server.port  # the one it picked
    with _takes_the_port_once(signal_file, port) as other:
        try:
            with pytest.raises(InputError if given else EngineError) as refused:
                server.start(timeout_s=60)
            name = psutil.Process(other.pid).name()
        finally:
            other.kill()
    by = f"by another program, pid {other.pid} ({name})"
    if given:
        expected = f"port {port} on 127.0.0.1 is already in use, {by}: give another port or"
    else:
        expected = f"port {port}, picked free for vLLM, was taken, {by} before vLLM answered"
    assert str(refused.value).startswith(expected), refused.value
    assert "\n" not in str(refused.value)
    assert _none_left(install.executable) and not server.is_running()


def test_the_server_or_a_process_below_it_or_after_it_listening_is_its_own() -> None:
    with _sleeper() as before:  # started before the listener
        try:
            with running_truth_server(TIMING) as url:
                port = _port(url)
                listening = _listener_pid(port)
                name = psutil.Process(listening).name()
                assert holder(port) == f"pid {listening} ({name})"
                # The listener itself, or below the process started: the server's own.
                assert other_listener(port, listening) is None
                assert other_listener(port, os.getpid()) is None  # the truth server's parent
                # Started after the process started (Docker's port proxy for `docker run -p`):
                # its own too.
                assert other_listener(port, before.pid) is None
                with _sleeper() as after:  # started after the listener, and not above it
                    try:
                        assert other_listener(port, after.pid) == f"pid {listening} ({name})"
                    finally:
                        after.kill()
            # Nobody listening any more: nothing to refuse (checked against a process that would
            # have been refused above); nor once the process started has ended.
            assert holder(port) is None
            with _sleeper() as later:
                try:
                    assert other_listener(port, later.pid) is None
                finally:
                    later.kill()
            assert other_listener(port, after.pid) is None
        finally:
            before.kill()


def test_only_listeners_that_127_0_0_1_reaches_count() -> None:
    """A program listening on another loopback address (or ::1, or a LAN address) does not
    answer the server's port, so it is no one's holder there; on 127.0.0.1 it is."""
    port = free_port()
    me = f"pid {os.getpid()} ({psutil.Process().name()})"
    with _sleeper() as later:
        try:
            for address, held in (("127.0.0.2", None), ("127.0.0.1", me)):
                with socket.create_server((address, port)):
                    assert holder(port) == held
                    assert other_listener(port, later.pid) == held
        finally:
            later.kill()
    assert "::" in REACHED_FROM_LOOPBACK and "::1" not in REACHED_FROM_LOOPBACK


def test_serve_refuses_a_given_port_another_program_answers_in_one_line(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    script = tmp_path / "server.py"
    script.write_text(NEVER_BINDS)
    with running_truth_server(TIMING) as url:
        port = _port(url)
        holder_pid = _listener_pid(port)
        done = subprocess.run(
            [
                *(sys.executable, "-m", "sagemeter", "serve"),
                *(f"cmd:{PYTHON} {shlex.quote(str(script))} {{port}}", "--port", str(port)),
            ],
            capture_output=True,
            text=True,
            env={**sagemeter_env, "COLUMNS": "300"},
            timeout=90,
        )
    assert done.returncode == 2, done.stderr  # bad input, as a server's own "address in use"
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    said = f"port {port} on 127.0.0.1 is already in use, by another program, pid {holder_pid} ("
    assert said in lines[-1], done.stderr
    assert "Traceback" not in done.stderr and "serving" not in done.stdout
    assert _running(script) == []
