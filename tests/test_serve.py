"""`sagemeter serve` in the foreground: reachable on 127.0.0.1, and Ctrl-C stops the engine too."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import httpx
import pytest

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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
