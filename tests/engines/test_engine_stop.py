"""An embedded engine busy decoding ends when told to, and when its parent is killed.

llama.cpp's server, torn down, first finishes every reply in flight: an engine told to stop with
four long replies in flight was still decoding 120 s after its SIGTERM (so `LocalEngine.stop`
waited for SIGKILL, and an engine whose parent was gone decoded on for minutes, holding the CPU
of whatever ran next). The worker now leaves at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest

from sagemeter.engines.checkpoints import resolve_checkpoint
from sagemeter.engines.llamacpp import LocalEngine

LONG_REPLY = {
    "model": "m",
    "messages": [{"role": "user", "content": "Tell a long story"}],
    "max_tokens": 900,
    "ignore_eos": True,
}

# A parent that starts the engine from a worker thread (as `measure` does, so the kernel's
# parent-death signal is not used and the engine's own watch must notice), keeps it decoding
# four long replies, and waits to be killed.
PARENT = textwrap.dedent(
    """
    import sys, threading, time
    import httpx
    from sagemeter.engines.checkpoints import resolve_checkpoint
    from sagemeter.engines.llamacpp import LocalEngine

    engine = LocalEngine(resolve_checkpoint("smollm2-q4_1"), parallel=4, threads=1)
    starter = threading.Thread(target=engine.start)
    starter.start()
    starter.join()
    body = {"model": "m", "messages": [{"role": "user", "content": "Tell a long story"}],
            "max_tokens": 900, "ignore_eos": True}
    for _ in range(4):
        threading.Thread(
            target=lambda: httpx.post(engine.base_url + "/chat/completions", json=body, timeout=600),
            daemon=True,
        ).start()
    time.sleep(1.0)
    print(engine.pid, flush=True)
    time.sleep(600)
    """
)


def _ended(pid: int, within_s: float) -> bool:
    """Whether `pid` is gone (or a zombie) within `within_s`."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def _ask_long(url: str) -> None:
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(url + "/chat/completions", json=LONG_REPLY, timeout=600)


@pytest.mark.slow
def test_a_busy_engine_ends_at_once_on_sigterm(tmp_path: Path) -> None:
    engine = LocalEngine(
        resolve_checkpoint("smollm2-q4_1"), parallel=4, threads=1, log_path=tmp_path / "e.log"
    )
    engine.start()
    try:
        assert engine.base_url is not None and engine.pid is not None
        for _ in range(4):  # the clients stay connected, waiting for their replies
            threading.Thread(target=_ask_long, args=(engine.base_url,), daemon=True).start()
        time.sleep(1.0)
        os.kill(engine.pid, signal.SIGTERM)
        assert _ended(engine.pid, 5.0), "the engine was still decoding 5 s after SIGTERM"
    finally:
        engine.stop()


@pytest.mark.slow
def test_a_busy_engine_ends_with_its_killed_parent(tmp_path: Path) -> None:
    env = {**os.environ, "SAGEMETER_HOME": str(tmp_path / "home")}
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, env=env
    )
    engine_pid = 0
    try:
        assert parent.stdout is not None
        engine_pid = int(parent.stdout.readline())
        assert not _ended(engine_pid, 0.2)  # decoding
        parent.kill()  # SIGKILL: the parent can stop nothing
        parent.wait(timeout=10)
        # The engine's watch polls every 0.25 s; a worker that finished the replies first took
        # minutes here.
        assert _ended(engine_pid, 5.0), "the engine outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        if engine_pid and not _ended(engine_pid, 0):
            os.kill(engine_pid, signal.SIGKILL)
