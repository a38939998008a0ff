"""The parent of `vllm serve`: it ends vLLM (and its engine processes) when sagemeter goes away.

Run as `python -m sagemeter.engines.vllm_launcher VLLM serve …` in a new session (its own
process group, which vLLM's API server and engine core processes inherit). It serves until
SIGTERM/SIGINT or until its stdin closes, which happens when sagemeter exits for any reason,
even SIGKILL, so a vLLM started by sagemeter never outlives it. Then it asks vLLM to stop
(SIGTERM, vLLM's own graceful shutdown) and, after a grace period, kills the whole group.
Standard library only: it runs before anything else is imported.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading

GRACE_S = 20.0


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m sagemeter.engines.vllm_launcher VLLM serve …", file=sys.stderr)
        return 2
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())

    def watch_stdin() -> None:
        sys.stdin.buffer.read()
        stop.set()

    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    threading.Thread(target=watch_stdin, daemon=True).start()
    while not stop.is_set():
        if child.poll() is not None:
            return child.returncode
        stop.wait(0.5)
    child.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=GRACE_S)
    # Whatever vLLM left behind (an engine core that did not exit) shares our process group.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(os.getpgrp(), signal.SIGKILL)
    return 0  # pragma: no cover - the line above ends this process too


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
