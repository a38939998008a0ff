"""The local backend: the embedded llama.cpp engine, started and stopped by sagemeter.

Lifecycle: `start()` spawns the worker process bound to 127.0.0.1, waits until it reports its
address and answers /health, and keeps its log; `stop()` ends it. Use it as a context manager so
an exception or Ctrl-C never leaves an engine running.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from sagemeter.atomic import open_output
from sagemeter.engines.checkpoints import Checkpoint
from sagemeter.engines.startup_causes import LLAMACPP_CAUSES, failure_cause, start_failed
from sagemeter.errors import EngineError, UserError
from sagemeter.parentwatch import child_env
from sagemeter.paths import state_dir
from sagemeter.results import StartupFacts
from sagemeter.startup_log import parse_llamacpp_log

DEFAULT_PARALLEL_SLOTS = 16
# One context per slot wherever the engine starts (`serve`, `measure local:`, the MCP face), so a
# checkpoint reports one KV cache size; a measurement asking longer replies gets more (see
# `endpoints.slot_context`), `serve --ctx-per-slot` too.
DEFAULT_CTX_PER_SLOT = 1024
# Parallel slots, at most: llama.cpp's own limit (LLAMA_MAX_SEQ; more is refused as it loads,
# "n_seq_max must be <= 256").
MAX_SLOTS = 256
START_TIMEOUT_S = 180.0
# How many threads llama.cpp decodes with; unset, every core. On a host whose cores are shared
# (other engines, other jobs) fewer is faster: llama.cpp's threads wait for each other by
# spinning, and two engines of two threads each on two cores decode many times slower.
THREADS_VARIABLE = "SAGEMETER_LLAMA_THREADS"
MAX_THREADS = 1024
WaitFn = Callable[[float], None]  # told the seconds spent so far while the engine starts


def _no_wait(_: float) -> None:
    pass


def default_log_path(name: str) -> Path:
    """Where an engine's log goes when no run folder holds it: the state dir's `logs/`."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    folder = state_dir() / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkstemp(prefix=f"{name}-{stamp}-", suffix=".log", dir=folder)[1])


def engine_threads() -> int:
    """The threads every embedded engine sagemeter starts uses: `SAGEMETER_LLAMA_THREADS`, or
    -1 (llama.cpp's every core) when it is unset or empty."""
    given = os.environ.get(THREADS_VARIABLE, "").strip()
    if not given:
        return -1
    if given.isdigit() and 1 <= int(given) <= MAX_THREADS:
        return int(given)
    raise UserError(
        f"{THREADS_VARIABLE}={given!r}: give a whole number of threads from 1 to {MAX_THREADS}, "
        "or leave it unset for every core"
    )


def engine_version() -> str:
    """The xllamacpp wheel's version, which pins the llama.cpp it embeds."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"xllamacpp {version('xllamacpp')}"
    except PackageNotFoundError:
        raise UserError(
            "the embedded engine needs the `local` extra: pip install 'sagemeter[local]'"
        ) from None


class LocalEngine:
    """One llama.cpp server process for one checkpoint."""

    def __init__(
        self,
        checkpoint: Checkpoint,
        *,
        parallel: int = DEFAULT_PARALLEL_SLOTS,
        ctx_per_slot: int = DEFAULT_CTX_PER_SLOT,
        port: int = 0,
        threads: int | None = None,
        log_path: Path | None = None,
    ) -> None:
        """`threads` None: `engine_threads()`."""
        self.checkpoint = checkpoint
        self.parallel = parallel
        self.ctx_per_slot = ctx_per_slot
        self.port = port
        self.threads = engine_threads() if threads is None else threads
        self.log_path = log_path or default_log_path(checkpoint.name)
        self.base_url: str | None = None
        self.started_s: float | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout_s: float = START_TIMEOUT_S, on_wait: WaitFn = _no_wait) -> str:
        """Start the engine and return its OpenAI base URL (ending in /v1); `on_wait` is told
        the seconds spent, a few times a second, until it answers."""
        engine_version()  # a clear line if the local extra is missing
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            "-m",
            "sagemeter.engines.llamacpp_worker",
            str(self.checkpoint.path),
            "--port",
            str(self.port),
            "--parallel",
            str(self.parallel),
            "--ctx-per-slot",
            str(self.ctx_per_slot),
            "--threads",
            str(self.threads),
            "--alias",
            self.checkpoint.name,
        ]
        began = time.perf_counter()
        with open_output(self.log_path, "the engine log") as log:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=child_env(os.environ.copy()),  # it dies with us, even if we are killed
                start_new_session=True,  # Ctrl-C reaches us; we stop the engine ourselves
            )

        def waiting() -> None:
            on_wait(time.perf_counter() - began)

        try:
            address = self._read_address(began + timeout_s, waiting)
            self._wait_healthy(address, began + timeout_s, waiting)
        except BaseException:
            self.stop()
            raise
        self.started_s = time.perf_counter() - began
        self.base_url = address.rstrip("/") + "/v1"
        return self.base_url

    def _read_address(self, deadline: float, waiting: Callable[[], None]) -> str:
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        buffered = b""
        while time.perf_counter() < deadline:
            if self._process.poll() is not None:
                cause = self._failure_cause()
                raise start_failed(
                    f"the embedded engine could not start {self.checkpoint.path.name}: "
                    f"{cause} (log: {self.log_path})",
                    cause,
                )
            waiting()
            ready, _, _ = select.select([stdout], [], [], 0.2)
            if not ready:
                continue
            chunk = os.read(stdout.fileno(), 4096)
            buffered += chunk
            for line in buffered.splitlines():
                if line.startswith(b"{"):
                    try:
                        return str(json.loads(line)["listening"])
                    except (ValueError, KeyError):
                        continue
        raise EngineError(
            f"the embedded engine did not start within the deadline: {self._failure_cause()} "
            f"(log: {self.log_path})"
        )

    def _wait_healthy(self, address: str, deadline: float, waiting: Callable[[], None]) -> None:
        while time.perf_counter() < deadline:
            waiting()
            try:
                with urllib.request.urlopen(address + "/health", timeout=5.0) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass  # still loading (503) or not listening yet
            time.sleep(0.1)
        raise EngineError(f"the embedded engine at {address} never became healthy")

    def _failure_cause(self) -> str:
        """Why the engine did not start, in words, from its own log (else the log's last line)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "it left no log"
        return failure_cause(text, LLAMACPP_CAUSES, port=self.port, file=self.checkpoint.path.name)

    def stop(self, timeout_s: float = 15.0) -> None:
        """End the engine: close its stdin, then SIGTERM, then SIGKILL if it lingers."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        for step in ("stdin", "term", "kill"):
            if step == "stdin" and process.stdin:
                process.stdin.close()
            elif step == "term":
                process.send_signal(signal.SIGTERM)
            elif step == "kill":
                process.kill()
            try:
                process.wait(timeout=timeout_s / 3)
                break
            except subprocess.TimeoutExpired:
                continue
        if process.stdout:
            process.stdout.close()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def startup_facts(self) -> StartupFacts:
        return parse_llamacpp_log(self.log_text().splitlines())

    def __enter__(self) -> LocalEngine:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
