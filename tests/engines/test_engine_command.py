"""`cmd:COMMAND`: any OpenAI-compatible server started from a command line, measured and stopped.

The server is sagemeter's own truth server (`sagemeter calibrate-server`, known timing) run as
the user's command; the failure paths use small Python scripts that exit early, never answer, or
write their pid so the test can see that nothing is left running.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sagemeter.engines.registry import engine_named, engines
from sagemeter.errors import UserError
from sagemeter.targets import CommandTarget, EngineTarget, masked_words, parse_target
from tests import cli_run

PYTHON = shlex.quote(sys.executable)
TRUTH = f"{PYTHON} -m sagemeter calibrate-server --ttft 20ms --itl 2ms --port {{port}}"
QUICK = ["--quick", "--levels", "1,2", "--repeats", "2", "--batches", "1"]


def _run(
    args: list[str], env: dict[str, str], timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagemeter", *args],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "200"},
        timeout=timeout,
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (already ended, not yet reaped by its parent) is not running.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def _script(tmp_path: Path, name: str, body: str) -> str:
    """A command line running `body` as a Python script that takes the port as argv[1]."""
    path = tmp_path / f"{name}.py"
    path.write_text(body)
    return f"{PYTHON} {shlex.quote(str(path))} {{port}}"


HANGING = """
import os, pathlib, sys, time
pathlib.Path(sys.argv[0]).with_suffix(".pid").write_text(str(os.getpid()))
print("loading weights ...", flush=True)
time.sleep(600)
"""


def test_the_target_is_parsed_once_with_its_port_mark_and_a_name() -> None:
    target = parse_target('cmd:python -m sglang.launch_server --model "M x" --port {port}')
    assert isinstance(target, CommandTarget) and isinstance(target, EngineTarget)
    assert target.words() == [
        "python",
        "-m",
        "sglang.launch_server",
        "--model",
        "M x",
        "--port",
        "{port}",
    ]
    assert target.default_name == "cmd-sglang.launch_server"
    assert parse_target("cmd:vllm serve /m --port={port}").default_name == "cmd-vllm-serve"
    assert str(target).startswith("cmd:python -m sglang")
    assert engine_named("cmd") is not None and engine_named("cmd").runs_commands  # type: ignore[union-attr]
    assert {"local", "vllm", "cmd"} <= set(engines())


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("cmd:", "names no command"),
        ("cmd:   ", "names no command"),
        ("cmd:vllm serve m --port 8000", "{port}"),
        ('cmd:vllm serve "m --port {port}', "quote the command"),
        ("nosuchengine:x", "no engine is called 'nosuchengine'"),
    ],
)
def test_a_bad_command_target_is_one_line(text: str, says: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_target(text)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_secret_flags_are_masked_wherever_the_command_is_shown() -> None:
    words = ["srv", "--api-key", "sk-secret-1", "--hf-token=hf_abcdef", "--port", "{port}"]
    assert masked_words(words) == ["srv", "--api-key", "***", "--hf-token=***", "--port", "{port}"]
    for text in ("cmd:srv --api-key sk-secret-1 --port {port}", "cmd:env HF_TOKEN=hf_abc srv"):
        with pytest.raises(UserError) as caught:  # kept in journals and results: refused
            parse_target(text)
        assert "environment" in str(caught.value)
        assert "sk-secret-1" not in str(caught.value) and "hf_abc" not in str(caught.value)
    harmless = "cmd:srv --tokenizer t --max-num-batched-tokens 8 --port {port}"
    assert str(parse_target(harmless)) == harmless


@pytest.mark.slow
def test_measure_runs_a_command_server_keeps_its_log_and_stops_it(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    out = tmp_path / "out"
    done = _run(["measure", str(out), f"cmd:{TRUTH}", "--name", "truth", *QUICK], sagemeter_env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((out / "measure-truth.json").read_text())
    assert result["complete"] is True
    environment = result["detail"]["environment"]
    assert environment["backend"] == "cmd"
    assert environment["target"] == f"cmd:{TRUTH}"
    # The truth server streams a token every 2 ms: the decode rate is known.
    assert result["decode_tokens_per_second"] == pytest.approx(500, rel=0.15)
    log = out / "engine-truth.log"
    first = log.read_text().splitlines()[0]
    assert first.startswith("$ ") and "calibrate-server" in first and "{port}" not in first
    port = int(first.split("--port ")[1].split()[0])
    with pytest.raises(OSError):  # nothing listens there any more: the server was stopped
        import socket

        socket.create_connection(("127.0.0.1", port), timeout=1).close()


# A server that says what vLLM says at start-up, then serves: the truth server, exec'd.
VLLM_SPEAKING = """
import os, sys
for line in (
    "INFO 12-05 10:00:00 [api_server.py:1] vLLM API server version 0.11.0",
    "INFO 12-05 10:00:02 [gpu_model_runner.py:1] Model loading took 0.2500 GiB and 1.25 seconds",
    "INFO 12-05 10:00:03 [kv_cache_utils.py:1] CPU KV cache size: 65,536 tokens",
    "INFO 12-05 10:00:03 [kv_cache_utils.py:1] Maximum concurrency for 2,048 tokens per request: 32.00x",
):
    print(line, flush=True)
os.execv(sys.executable, [sys.executable, "-m", "sagemeter", "calibrate-server", "--ttft", "20ms",
                          "--itl", "2ms", "--port", sys.argv[1]])
"""


@pytest.mark.slow
def test_a_command_servers_start_up_facts_reach_the_result(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    """The start-up lines a `cmd:` server prints are read by the engine parsers (vLLM's here) and
    land in the result: its weights and KV cache at the top, the log they came from named."""
    out = tmp_path / "out"
    command = _script(tmp_path, "vllm_speaking", VLLM_SPEAKING)
    done = _run(["measure", str(out), f"cmd:{command}", "--name", "v", *QUICK], sagemeter_env)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((out / "measure-v.json").read_text())
    assert result["detail"]["environment"]["backend"] == "cmd"
    assert result["detail"]["startup"]["source"] == f"vllm log (engine log {out / 'engine-v.log'})"
    assert result["weights_gib"] == 0.25
    assert result["kv_cache_tokens"] == 65_536
    assert result["load_seconds"] > 0


@pytest.mark.slow
def test_load_and_serve_start_a_command_server_too(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    out = tmp_path / "load.json"
    done = _run(
        [
            "load",
            f"cmd:{TRUTH}",
            "-c",
            "2",
            "--max-tokens",
            "64",
            "--duration",
            "2s",
            "--out",
            str(out),
        ],
        sagemeter_env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "serves at http://127.0.0.1:" in done.stderr
    loaded = json.loads(out.read_text())
    assert loaded["requests_completed"] > 0 and loaded["requests_failed"] == 0
    # 64 tokens make a request ~150 ms, so the client's own gap between requests (a few tenths of
    # a millisecond) stays well under load's 1% validity bound even on a busy host.
    assert loaded["output_tokens"] == 64 * loaded["requests_completed"]

    served = subprocess.Popen(
        [sys.executable, "-m", "sagemeter", "serve", f"cmd:{TRUTH}", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**sagemeter_env, "COLUMNS": "200"},
    )
    assert served.stdout is not None
    line = ""
    deadline = time.monotonic() + 60
    while "serving" not in line and time.monotonic() < deadline:
        line = served.stdout.readline()
    assert "serving cmd-" in line and "http://127.0.0.1:" in line
    served.send_signal(signal.SIGINT)
    rest = served.communicate(timeout=30)[0]
    assert "stopped" in rest and served.returncode == 0


def test_a_command_that_exits_early_is_named_with_its_cause_and_exits_5(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    command = _script(
        tmp_path, "early", 'import sys\nprint("error: unknown flag --frobnicate")\nsys.exit(3)\n'
    )
    done = _run(["measure", str(tmp_path / "out"), f"cmd:{command}", "--quick"], sagemeter_env)
    assert done.returncode == 5, done.stderr  # an engine failure (errors.EngineError), not input
    line = done.stderr.strip()
    assert "exited with code 3 before it answered" in line
    assert "unknown flag --frobnicate" in line and "Traceback" not in done.stderr


def test_a_program_that_is_not_there_is_refused_before_any_work(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    out = tmp_path / "out"
    args = ["measure", str(out), "cmd:no-such-server-program --port {port}", "--quick"]
    done = cli_run.invoke(args, {**sagemeter_env, "COLUMNS": "200"})
    assert done.returncode == 2 and "'no-such-server-program' is not on PATH" in done.stderr
    assert not out.exists()


@pytest.mark.slow
def test_a_server_that_never_answers_is_stopped_at_the_startup_timeout(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    command = _script(tmp_path, "hang", HANGING)  # says "loading weights" at once, then hangs
    done = _run(
        ["measure", str(tmp_path / "out"), f"cmd:{command}", "--quick", "--startup-timeout", "2s"],
        sagemeter_env,
    )
    assert done.returncode == 5, done.stderr  # the engine never started: EngineError
    assert "did not answer within 2 s" in done.stderr and "loading weights" in done.stderr
    assert _gone(int((tmp_path / "hang.pid").read_text()))


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_no_server_is_left_running_when_sagemeter_is_stopped_while_it_starts(
    tmp_path: Path, sagemeter_env: dict[str, str], signum: int
) -> None:
    command = _script(tmp_path, "hang", HANGING)
    measuring = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sagemeter",
            "measure",
            str(tmp_path / "out"),
            f"cmd:{command}",
            "--quick",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=sagemeter_env,
    )
    pid_file = tmp_path / "hang.pid"
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    server_pid = int(pid_file.read_text())
    measuring.send_signal(signum)
    measuring.wait(timeout=60)
    assert measuring.returncode != 0
    assert _gone(server_pid, within_s=15), f"the server {server_pid} outlived sagemeter ({signum})"


@pytest.mark.slow
async def test_mcp_refuses_a_command_target_unless_the_user_allowed_commands(
    tmp_path: Path,
) -> None:
    """An assistant must not run programs on its own: `cmd:` over MCP needs --allow-commands,
    in measure_endpoint and in a plan's arms alike; with it, the command is measured."""
    from mcp import Client

    from sagemeter.mcp import ServerConfig, build_server
    from tests.mcp_helpers import error_line, ok

    marker = tmp_path / "ran"
    command = _script(tmp_path, "marker", f"open({str(marker)!r}, 'w').close()\n")
    arms = "".join(f'[[arm]]\nname = "{name}"\ntarget = "cmd:{command}"\n' for name in "ab")
    plan = f'name = "p"\n{arms}'
    refused = ServerConfig(results_dir=tmp_path / "results", allow_write=True)
    async with Client(build_server(refused)) as client:
        measured = await client.call_tool("measure_endpoint", {"target": f"cmd:{command}"})
        planned = await client.call_tool("run_experiment", {"plan": plan})
    for answer in (measured, planned):
        assert "started without --allow-commands" in error_line(answer)
    assert not marker.exists()

    allowed = ServerConfig(results_dir=tmp_path / "results", allow_commands=True)
    async with Client(build_server(allowed)) as client:
        answer = await client.call_tool(
            "measure_endpoint",
            {"target": f"cmd:{TRUTH}", "name": "truth", "quick": True, "load_levels": [1]},
        )
    assert ok(answer)["complete"] is True


# Answers /v1/models at once and ignores SIGTERM: only the group's SIGKILL ends it.
STUBBORN = """
import json, os, pathlib, signal, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pathlib.Path(sys.argv[0]).with_suffix(".pid").write_text(str(os.getpid()))
class Models(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "stub", "object": "model"}]})
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())
    def log_message(self, *args):
        pass
HTTPServer(("127.0.0.1", int(sys.argv[1])), Models).serve_forever()
"""


def test_a_server_that_ignores_sigterm_is_gone_soon_after_sagemeter_is_killed(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    """Killed with SIGKILL, sagemeter cannot ask for a graceful stop: the launcher sees stdin
    close without `stop` and gives the server one second, not the ten of an asked stop."""
    command = _script(tmp_path, "stubborn", STUBBORN)
    served = subprocess.Popen(
        [sys.executable, "-m", "sagemeter", "serve", f"cmd:{command}", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**sagemeter_env, "COLUMNS": "200"},
    )
    assert served.stdout is not None
    line = ""
    deadline = time.monotonic() + 60
    while "serving" not in line and time.monotonic() < deadline:
        line = served.stdout.readline()
    assert "serving cmd-" in line
    server_pid = int((tmp_path / "stubborn.pid").read_text())
    served.kill()
    served.wait(timeout=10)
    assert _gone(server_pid, within_s=3.0), "a server ignoring SIGTERM outlived sagemeter"
