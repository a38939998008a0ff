"""A Ctrl-C is obeyed even when its mark lands while the event loop is already asleep.

The kernel-level half of a signal only marks it pending; the main thread runs the Python handler
when it next looks. If the mark lands just after the loop's last look (the main thread preempted
there on a busy host), or in another thread, an idle loop asleep in epoll never looks again. The
child below serves the known-truth server the way `sagemeter calibrate-server` does and, once
its main thread sleeps in the loop's wait, has another thread take a real SIGINT: the handler is
pending and nothing interrupts the wait, which is that race made certain. asyncio.run alone
left such a server serving until killed (measured: still serving 15 s later, every time).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sagemeter import signal_wakeup

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

CHILD = textwrap.dedent(
    """
    import signal, sys, threading, time
    from pathlib import Path

    from sagemeter import signal_wakeup
    from sagemeter.calibrate.loops import run_precisely
    from sagemeter.calibrate.server import serve
    from sagemeter.calibrate.timing import TruthTiming

    MAIN = threading.get_native_id()

    def main_thread_asleep() -> bool:
        stat = Path(f"/proc/self/task/{MAIN}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] == "S"

    def ctrl_c_taken_by_this_thread() -> None:
        while not main_thread_asleep():
            time.sleep(0.005)
        print("asleep", flush=True)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    def ready(port: int) -> None:
        threading.Thread(target=ctrl_c_taken_by_this_thread, daemon=True).start()

    coroutine = serve(TruthTiming(ttft_s=0.02, itl_s=0.001), 0, ready)
    try:
        if sys.argv[1] == "precise":  # calibrate-server's loop
            run_precisely(coroutine)
        elif sys.argv[1] == "anyio":  # the MCP server's
            import anyio
            from sagemeter.mcp.server import _woken_by_signals

            anyio.run(_woken_by_signals, lambda: coroutine)
        else:  # measure's, run's, fidelity's
            signal_wakeup.run(coroutine)
    except KeyboardInterrupt:
        print("stopped", flush=True)
    """
)


@pytest.mark.parametrize("loop", ["precise", "default", "anyio"])
def test_a_ctrl_c_pending_while_the_loop_sleeps_stops_the_server(
    loop: str, tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    process = subprocess.Popen(
        [sys.executable, str(script), loop],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=sagemeter_env,
    )
    try:
        out, err = process.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise AssertionError(f"still serving 15 s after a Ctrl-C ({out!r})") from None
    assert out.split() == ["asleep", "stopped"], err
    assert process.returncode == 0, err


def test_the_loop_gives_the_wakeup_back_as_it_found_it() -> None:
    """Nothing outlives the run: the previous wake-up target is back, and the result is the
    coroutine's."""

    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(before)
    assert signal_wakeup.run(answer()) == 42
    assert signal.set_wakeup_fd(before) == before
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
