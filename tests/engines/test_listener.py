"""A server sagemeter starts is taken as ready only when its port answers from the server: a
program that held the port before the server started is refused, on every engine that launches
a server (`LaunchedServer`: `vllm:`, `cmd:` and the engines built on it) and through every face
(the check is in the launch itself; `serve` stands for the commands here).

The other program is sagemeter's own truth server, which lists a model at /v1/models as a real
server would; the server "started" is a script that never binds its port, as vLLM does not for
its first 40 s.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from sagemeter.calibrate.child import running_truth_server
from sagemeter.calibrate.timing import TruthTiming
from sagemeter.engines.command import CommandServer
from sagemeter.engines.listener import other_listener
from sagemeter.errors import EngineError
from sagemeter.targets import CommandTarget, parse_target

TIMING = TruthTiming(ttft_s=0.01, itl_s=0.002)
PYTHON = shlex.quote(sys.executable)


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


def _slow_starter(tmp_path: Path) -> str:
    """A command line whose program loads for a minute before it would bind its port."""
    script = tmp_path / "slow.py"
    script.write_text("import time\ntime.sleep(60)\n")
    return f"{PYTHON} {shlex.quote(str(script))} {{port}}"


def _running(script: Path) -> list[int]:
    """Processes (not yet reaped zombies aside) running `script`."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        if str(script) in (process.info["cmdline"] or []) and process.info["status"] != "zombie":
            found.append(process.pid)
    return found


def test_a_program_that_held_the_port_first_is_refused_and_the_server_stopped(
    tmp_path: Path,
) -> None:
    with running_truth_server(TIMING) as url:
        port = _port(url)
        target = parse_target(f"cmd:{_slow_starter(tmp_path)}")
        assert isinstance(target, CommandTarget)
        server = CommandServer(target, log_path=tmp_path / "engine.log", port=port)
        with pytest.raises(EngineError) as refused:
            server.start(timeout_s=30)
        message = str(refused.value)
        holder = _listener_pid(port)
        assert f"port {port} is answered by another program, pid {holder} (" in message
        assert "was listening before the command started" in message
        # The server it started is stopped, not left loading (it may not have run a line yet).
        assert not server.is_running()
        deadline = time.monotonic() + 15
        while _running(tmp_path / "slow.py") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _running(tmp_path / "slow.py") == []


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])


def test_the_server_or_a_process_below_it_listening_is_its_own(tmp_path: Path) -> None:
    with _sleeper() as before:  # started before the listener
        try:
            with running_truth_server(TIMING) as url:
                port = _port(url)
                holder = _listener_pid(port)
                # The listener itself, or below the process started (this process's child): its
                # own.
                assert other_listener(port, holder) is None
                assert other_listener(port, os.getpid()) is None
                # Started after the process started (Docker's port proxy for `docker run -p`): its
                # own too.
                assert other_listener(port, before.pid) is None
                with _sleeper() as after:  # started after the listener, and not above it
                    try:
                        name = psutil.Process(holder).name()
                        assert other_listener(port, after.pid) == f"pid {holder} ({name})"
                    finally:
                        after.kill()
            # Nobody listening: nothing to refuse; nor once the process started has ended.
            assert other_listener(port, os.getpid()) is None
            assert other_listener(port, after.pid) is None
        finally:
            before.kill()


def test_serve_refuses_a_port_another_program_answers_in_one_line(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    with running_truth_server(TIMING) as url:
        port = _port(url)
        done = subprocess.run(
            [
                *(sys.executable, "-m", "sagemeter", "serve"),
                *(f"cmd:{_slow_starter(tmp_path)}", "--port", str(port)),
            ],
            capture_output=True,
            text=True,
            env={**sagemeter_env, "COLUMNS": "300"},
            timeout=120,
        )
    assert done.returncode == 5, done.stderr  # an engine failure (errors.EngineError)
    assert f"port {port} is answered by another program" in done.stderr
    assert "Traceback" not in done.stderr
    assert "serving" not in done.stdout
