"""Child processes die with their parent, even when the parent is killed with SIGKILL.

A killed `load`, `measure` or `run` must not leave workers sending requests for the rest of the
run, nor an engine holding a port. The parent marks a child's environment (`child_env`); the
child calls `die_with_parent` first thing. On Linux the kernel signals the child when its
parent dies (`PR_SET_PDEATHSIG`); that request follows the parent *thread* that started the
child, so it is only made when the child was started from the main thread (an engine started
from a worker thread would otherwise die when that thread retires). Everywhere, a daemon thread
also watches for the parent pid to change (the child re-parented), which covers the rest.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time

PARENT_ENV = "SAGEMETER_PARENT_PID"
DEATHSIG_ENV = "SAGEMETER_PARENT_DEATHSIG"
PR_SET_PDEATHSIG = 1
WATCH_INTERVAL_S = 0.25


def child_env(env: dict[str, str]) -> dict[str, str]:
    """`env` plus what `die_with_parent` needs: this process's pid and whether the kernel may
    tie the child's life to this thread (only the main thread lives as long as the process)."""
    marked = dict(env)
    marked[PARENT_ENV] = str(os.getpid())
    on_main = threading.current_thread() is threading.main_thread()
    marked[DEATHSIG_ENV] = "1" if on_main else "0"
    return marked


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """In the child: receive `signum` when the parent named by `child_env` ends.

    Without the environment mark (started by hand) nothing is watched.
    """
    text = os.environ.pop(PARENT_ENV, "")
    use_deathsig = os.environ.pop(DEATHSIG_ENV, "0") == "1"
    if not text.isdigit():
        return
    parent = int(text)
    if use_deathsig:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    if os.getppid() != parent:  # the parent ended before the request above took effect
        os.kill(os.getpid(), signum)
        return
    threading.Thread(target=_watch, args=(parent, signum), name="parent-watch", daemon=True).start()


def _watch(parent: int, signum: int) -> None:
    """Poll: once this process has a new parent, the old one is gone."""
    while os.getppid() == parent:
        time.sleep(WATCH_INTERVAL_S)
    os.kill(os.getpid(), signum)
