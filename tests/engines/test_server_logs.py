"""`measure --server-log` / `--docker` for http:// targets, through the real command against the
session's llama.cpp engine: its log's facts, labelled with their origin, and its /metrics
counts beside the client's. `docker` is a stand-in script on PATH (no Docker engine runs here):
the command line is the wire sagemeter speaks to it."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from sagemeter.engines.llamacpp import LocalEngine
from tests import cli_run

pytestmark = pytest.mark.slow

VLLM_LOG = """INFO vLLM API server version 0.30.0
INFO Initializing a V1 LLM engine (v0.30.0) with config: model='old', quantization=fp8, enforce_eager=False
INFO Model loading took 9.75 GiB memory and 82.751806 seconds
INFO GPU KV cache size: 723,484 tokens
INFO vLLM API server version 0.32.0
INFO Initializing a V1 LLM engine (v0.32.0) with config: model='new', quantization=None, enforce_eager=False
INFO Model loading took 8.01 GiB memory and 66.190265 seconds
INFO GPU KV cache size: 867,999 tokens, Maximum concurrency for 8,192 tokens per request: 105.96x
"""


# These tests check where the startup facts and server counts come from, not quality: three
# questions of 8 tokens rather than --quick's six of 24 (still a quality phase to count).
FEW_QUESTIONS = ("--questions-per-family", "1", "--quality-max-tokens", "8")


def run_measure(
    env: dict[str, str], *args: str, real_process: bool = False
) -> subprocess.CompletedProcess[str]:
    """`sagemeter measure ARGS` in this process, or as its own process (the slow timed run)."""
    run_cli = cli_run.run if real_process else cli_run.invoke
    return run_cli(["measure", *args], {**env, "COLUMNS": "200"})


def test_server_log_facts_and_llamacpp_metrics(
    engine: LocalEngine, engine_url: str, tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    done = run_measure(
        sagemeter_env, str(tmp_path), engine_url, "--quick", *FEW_QUESTIONS, "--name", "q4",
        "--server-log", str(engine.log_path), real_process=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "measure-q4.json").read_text())
    startup = result["detail"]["startup"]
    assert startup["source"] == f"llama.cpp log (--server-log {engine.log_path})"
    assert startup["quantization"] == "Q4_1" and 0.08 < startup["weights_gib"] < 0.1
    metrics = result["detail"]["server_metrics"]
    assert metrics["engine"] == "llama.cpp"
    phases = {phase["phase"]: phase for phase in metrics["phases"]}
    assert set(phases) == {"decode", "parallel", "quality"}
    for name in ("decode", "parallel"):
        phase = phases[name]
        # llama.cpp counts every generated token; the client's usage counts match them.
        assert phase["generation_tokens"] == phase["client"]["generation_tokens"] > 0, phase
        assert phase["agrees"] is True
        assert phase["engine_tokens_per_second"] > 0
    assert not any("server counted" in w for w in result["detail"]["warnings"])


def test_docker_logs_of_a_container(
    engine_url: str, tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "container.log"
    log.write_text(VLLM_LOG)
    docker = bin_dir / "docker"
    docker.write_text(
        "#!/bin/sh\n"
        '[ "$1" = logs ] && [ "$2" = my-vllm ] && exec cat ' + str(log) + "\n"
        'echo "Error response from daemon: No such container: $2" >&2; exit 1\n'
    )
    docker.chmod(docker.stat().st_mode | stat.S_IXUSR)
    env = {**sagemeter_env, "PATH": f"{bin_dir}{os.pathsep}{sagemeter_env['PATH']}"}
    done = run_measure(
        env, str(tmp_path), engine_url, "--quick", *FEW_QUESTIONS, "--levels", "1",
        "--name", "d", "--docker", "my-vllm",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    startup = json.loads((tmp_path / "measure-d.json").read_text())["detail"]["startup"]
    assert startup["source"] == "vllm log (docker logs my-vllm)"
    assert (startup["weights_gib"], startup["kv_cache_tokens"]) == (8.01, 867999)
    assert (startup["max_concurrency"], startup["startups_in_log"]) == (105.96, 2)
    assert startup["quantization"] is None
    missing = run_measure(env, str(tmp_path), engine_url, "--quick", "--docker", "nope")
    assert missing.returncode == 2
    assert (
        "docker logs nope failed: Error response from daemon: No such container: nope"
        in missing.stderr
    )
    assert "Traceback" not in missing.stderr


def test_log_options_are_checked_before_any_work(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    out = tmp_path / "out"
    cases = [
        (["http://127.0.0.1:9", "--server-log", str(tmp_path / "none.log")], "no such file"),
        (["local:smollm2-q4_1", "--server-log", "x.log"], "--server-log is for http:// targets"),
        (["http://127.0.0.1:9", "--server-log", "a", "--docker", "b"], "not both"),
    ]
    for args, needle in cases:
        done = run_measure(sagemeter_env, str(out), *args)
        assert done.returncode == 2, done.stderr
        assert needle in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    assert not out.exists()  # nothing was measured, nothing written
    no_docker = {**sagemeter_env, "PATH": str(tmp_path)}
    done = run_measure(no_docker, str(out), "http://127.0.0.1:9", "--docker", "c")
    assert done.returncode == 2 and "the docker command is not on PATH" in done.stderr
