"""`sagemeter serve` in the foreground: reachable on 127.0.0.1, and Ctrl-C stops the engine too."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from sagemeter.engines.endpoints import slot_context

pytestmark = pytest.mark.slow


def test_serve_answers_then_stops_on_ctrl_c(sagemeter_env: dict[str, str]) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sagemeter",
            "serve",
            "local:smollm2-q4_1",
            "--port",
            "0",
            "--parallel",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**sagemeter_env, "COLUMNS": "200"},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+/v1)", line)
        assert match, line
        url = match.group(1)
        # One context per slot for serve and measure: one checkpoint, one KV cache size.
        assert f"2 slots of {slot_context(512):,} tokens" in line, line
        models = httpx.get(f"{url}/models", timeout=10).json()
        assert models["data"][0]["id"] == "smollm2-q4_1"
        children = subprocess.run(
            ["pgrep", "-P", str(process.pid), "-f", "llamacpp_worker"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        assert children
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
        assert process.returncode == 0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(int(pid)) for pid in children):
            time.sleep(0.1)
        assert not any(_alive(int(pid)) for pid in children)
        try:
            httpx.get(f"{url}/models", timeout=2)
            raise AssertionError("the engine still answers after Ctrl-C")
        except httpx.HTTPError:
            pass
    finally:
        if process.poll() is None:
            process.kill()


def test_load_starts_the_embedded_engine_for_the_load_and_stops_it(
    sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sagemeter",
            "load",
            "local:smollm2-q4_1",
            "-c",
            "2",
            "--max-tokens",
            "8",
            "--duration",
            "1s",
            "--out",
            "r.json",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**sagemeter_env, "COLUMNS": "200"},
        timeout=180,
        check=False,
    )
    assert done.returncode in (0, 3), done.stderr  # 3: judged invalid on a busy host
    assert "smollm2-q4_1 serves at http://127.0.0.1:" in done.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["requests_completed"] > 0 and result["settings"]["max_tokens"] == 8
    log = re.search(r"\(log (.+?\.log)\)", done.stderr)
    assert log and "n_ctx" in Path(log.group(1)).read_text(errors="replace")
    served = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", done.stderr)
    assert served, done.stderr
    with pytest.raises(httpx.HTTPError):  # stopped with the command
        httpx.get(f"{served.group(1)}/models", timeout=2)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
