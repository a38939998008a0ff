"""The parent of a server sagemeter starts (`vllm serve`, a `cmd:` command): it ends the server
(and every process it started) when sagemeter goes away.

Run as `python -m sagemeter.engines.launcher [--grace SECONDS] [--scratch-env NAME] PROGRAM ARG…`
in a new session
(its own process group, which the server's own processes inherit). It serves until
SIGTERM/SIGINT or until its stdin closes, which happens when sagemeter exits for any reason,
even SIGKILL, so a server started by sagemeter never outlives it. Then it asks the server to stop
(SIGTERM, the server's own graceful shutdown) and, after the grace period, kills the whole group.
sagemeter asks for a stop by writing `stop` before it closes stdin; a stdin that closes without
it means sagemeter died (SIGKILL), and nobody waits for a graceful end any more: the grace is
then at most ORPHAN_GRACE_S, so a server that ignores SIGTERM does not outlive it by the grace.

`--scratch-env NAME` gives the server a private folder of scratch files, made in the temporary
folder and named by that variable (`TMPDIR` for vLLM, which leaves its inter-process sockets and
a file store there at every start), which the launcher removes once the server's group is gone,
however sagemeter ended.
Standard library only: it runs before anything else is imported.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass

GRACE_S = 20.0
ORPHAN_GRACE_S = 1.0  # sagemeter died without asking: the server gets this long after SIGTERM
STOP = b"stop\n"  # what sagemeter writes to ask for a stop (rather than dying)
USAGE = (
    "usage: python -m sagemeter.engines.launcher [--grace SECONDS] [--scratch-env NAME] "
    "PROGRAM ARG…"
)


@dataclass
class Launch:
    """What the launcher was asked: the grace period, the scratch variable, the server's command."""

    grace_s: float = GRACE_S
    scratch_env: str | None = None
    command: tuple[str, ...] = ()


def _split(argv: list[str]) -> Launch:
    """The launcher's own options, then the server's own command line."""
    launch = Launch()
    while len(argv) >= 2 and argv[0] in ("--grace", "--scratch-env"):
        if argv[0] == "--grace":
            launch.grace_s = float(argv[1])
        else:
            launch.scratch_env = argv[1]
        argv = argv[2:]
    launch.command = tuple(argv)
    return launch


def _kill_group_but_me() -> None:
    """SIGKILL every other process of this process group (Linux's /proc; elsewhere nothing)."""
    me, group = os.getpid(), os.getpgrp()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit() or int(entry) == me:
            continue
        with contextlib.suppress(OSError):
            if os.getpgid(int(entry)) == group:
                os.kill(int(entry), signal.SIGKILL)


def _end_group(scratch: str | None) -> None:
    """Kill what is left of the server's group, then remove its scratch folder."""
    _kill_group_but_me()
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str]) -> int:
    try:
        launch = _split(argv)
    except ValueError:
        launch = Launch()
    if not launch.command:
        print(USAGE, file=sys.stderr)
        return 2
    command, grace_s, scratch = list(launch.command), launch.grace_s, None
    if launch.scratch_env is not None:
        scratch = tempfile.mkdtemp(prefix="sagemeter-")
        os.environ[launch.scratch_env] = scratch
    stop = threading.Event()
    orphaned = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())

    def watch_stdin() -> None:
        if STOP not in sys.stdin.buffer.read():
            orphaned.set()  # closed without a word: sagemeter is gone
        stop.set()

    try:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    except OSError as exc:
        print(f"sagemeter: could not run {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        _end_group(scratch)
        return 127
    threading.Thread(target=watch_stdin, daemon=True).start()
    while not stop.is_set():
        code = child.poll()
        if code is not None:
            # The server ended on its own: end what it left in our group (worker processes),
            # then pass its code on. os._exit, since the stdin watcher still blocks in a read
            # that would abort the interpreter's shutdown.
            _end_group(scratch)
            sys.stderr.flush()
            os._exit(code if code >= 0 else 128 - code)
        stop.wait(0.5)
    child.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=min(grace_s, ORPHAN_GRACE_S) if orphaned.is_set() else grace_s)
    # Whatever the server left behind (an engine process that did not exit) shares our group.
    _end_group(scratch)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(os.getpgrp(), signal.SIGKILL)
    return 0  # pragma: no cover - the line above ends this process too


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
