"""One lifecycle for a server process sagemeter starts on 127.0.0.1 and stops again.

`vllm serve` and a `cmd:` command share it: the command line goes at the top of a log file that
takes all of the server's output; the server runs under `launcher` in its own process group (so
it never outlives sagemeter, even after SIGKILL); `start()` waits until `ready()` says it
serves, shows the wait through `on_wait`, and, when the server exits first or the deadline
passes, fails with the cause its log names; `stop()` asks the server to end (SIGTERM through
the launcher), then kills whatever is left of the group. Use it as a context manager so an
exception or Ctrl-C never leaves one running.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from sagemeter.atomic import open_output
from sagemeter.engines.launcher import STOP
from sagemeter.engines.listener import accepts_connections, holder, other_listener
from sagemeter.engines.ports import free_port
from sagemeter.engines.startup_causes import start_failed
from sagemeter.errors import EngineError, InputError, SagemeterError, UserError
from sagemeter.redaction import redact
from sagemeter.transport.bad_json import BAD_JSON
from sagemeter.transport.models_list import model_ids

WaitFn = Callable[[float], None]
POLL_S = 0.5


def no_wait(_: float) -> None:
    """Default: nothing to show while the server starts."""


def answers_ok(url: str, timeout_s: float = 5.0) -> bool:
    """The server answers `url` with 200 (vLLM's /health has an empty body)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError, http.client.HTTPException):
        return False


def get_json(url: str, timeout_s: float = 5.0, api_key: str | None = None) -> Any:
    """The JSON a server answers at `url`, or None while it cannot answer (not up, 503, junk);
    with `api_key`, sent as a bearer token (a server started with a key guards /v1/models)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        request = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            if answer.status != 200:
                return None
            return json.loads(answer.read(1 << 20))
    except (urllib.error.URLError, OSError, http.client.HTTPException):
        return None  # headers only, a cut body or a garbage status line: not answering yet
    except BAD_JSON:
        return None  # not JSON (or nested past the stack): no model list yet


def listed_models(root_url: str, api_key: str | None = None) -> list[str]:
    """The model ids a server lists at /v1/models (empty while it cannot answer)."""
    return model_ids(get_json(root_url + "/v1/models", api_key=api_key))


class LaunchedServer:
    """A server process on 127.0.0.1:`port`; subclasses say how to run it and when it is up."""

    what = "the server"  # how messages name it
    grace_s = 20.0  # from SIGTERM to SIGKILL when it is stopped
    # A variable naming a private scratch folder the launcher makes for the server and removes
    # after it (engines/launcher.py); None: the server's temporary files are its own business.
    scratch_env: str | None = None
    # The server listens from its own processes (vLLM): once its port answers, a program that
    # ran before it and listens there is refused (engines/listener.py). False for a command,
    # which may hand its port to a program that ran before it (rootless Docker's forwarder).
    listens_itself = True

    def __init__(self, *, log_path: Path, port: int = 0) -> None:
        self.log_path = log_path
        self.port_given = port != 0  # the user's port: another program on it is bad input
        self.port = port or free_port()
        self.base_url: str | None = None
        self.started_s: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        # A stop from another thread (a cancel while it starts) and the start's own Popen take
        # turns; a stop that comes first makes the start stop what it launched at once.
        self._lock = threading.Lock()
        self._stopped = False

    # What a subclass says.
    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    def working_folder(self) -> str | None:
        """The folder the server runs in (None: this process's)."""
        return None

    def ready(self) -> bool:
        """The server answers and serves what it was started for."""
        raise NotImplementedError

    def failure_cause(self, log_text: str) -> str:
        """Why the server did not start, in words, from its log."""
        return tail(log_text)

    def exited(self, code: int) -> str:
        """The start of the line saying the server ended before it was ready."""
        return f"{self.what} exited with code {code} while starting"

    def shown_command(self) -> str:
        """The command line as the log's first line shows it."""
        return " ".join(self.command())

    # The lifecycle.
    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout_s: float, on_wait: WaitFn = no_wait) -> str:
        """Start the server and return its OpenAI base URL (ending in /v1) once it is ready."""
        if accepts_connections(self.port):  # before anything starts: another program answers
            raise self._port_taken(holder(self.port))
        began = time.perf_counter()
        launcher = [sys.executable, "-m", "sagemeter.engines.launcher"]
        launcher += ["--grace", str(self.grace_s)]
        if self.scratch_env is not None:
            launcher += ["--scratch-env", self.scratch_env]
        with open_output(self.log_path, "the engine log") as log, self._lock:
            if self._stopped:
                raise UserError(f"{self.what} was stopped before it started")
            log.write(f"$ {redact(self.shown_command())}\n".encode())  # a key in it is masked
            log.flush()
            self._process = subprocess.Popen(
                [*launcher, *self.command()],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.environment(),
                cwd=self.working_folder(),
                start_new_session=True,  # its own process group: stopped as one
            )
        try:
            self._wait_ready(began + timeout_s, began, on_wait)
        except BaseException:
            self.stop()
            raise
        self.started_s = time.perf_counter() - began
        self.base_url = self.root_url + "/v1"
        return self.base_url

    def _wait_ready(self, deadline: float, began: float, on_wait: WaitFn) -> None:
        process = self._process
        assert process is not None
        while time.perf_counter() < deadline:
            if self._stopped:
                raise UserError(f"{self.what} was stopped while it started")
            code = process.poll()
            if code is not None:
                cause = self.failure_cause(self.log_text())
                raise start_failed(f"{self.exited(code)}: {cause} (log {self.log_path})", cause)
            if self.ready():
                if self.listens_itself:
                    self._refuse_another_listener(process.pid)
                return
            on_wait(time.perf_counter() - began)
            time.sleep(POLL_S)
        raise EngineError(
            f"{self.what} did not answer within {deadline - began:.0f} s; log {self.log_path}: "
            f"{self.failure_cause(self.log_text())}"
        )

    def _refuse_another_listener(self, launched_pid: int) -> None:
        """The port answered: refuse it when the program listening there is not the server but
        one that ran before it (engines/listener.py)."""
        other = other_listener(self.port, launched_pid)
        if other is not None:
            raise self._port_taken(other)

    def _port_taken(self, other: str | None) -> SagemeterError:
        """Another program holds the port: the user's to mend when they gave the port (bad
        input, exit 2, as when a server's own log says the address is in use), else a pick
        another program took first (exit 5), which a new run's pick escapes."""
        by = f", by another program, {other}" if other else ""
        if self.port_given:
            return InputError(
                f"port {self.port} on 127.0.0.1 is already in use{by}: give another port or "
                "stop that program"
            )
        return EngineError(
            f"port {self.port}, picked free for {self.what}, was taken{by} before {self.what} "
            f"answered on it: its answers are not the server's; run again for another port"
        )

    def stop(self, timeout_s: float | None = None) -> None:
        """End the server: close the launcher's stdin (SIGTERM to the server, the grace period),
        then kill whatever is left of the group."""
        with self._lock:
            self._stopped = True
            process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None and process.stdin:
            with contextlib.suppress(OSError):  # asked, not orphaned: the full grace period
                process.stdin.write(STOP)
            with contextlib.suppress(OSError):
                process.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=timeout_s if timeout_s is not None else self.grace_s + 10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # whatever is left of the group
        process.wait()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def tail(text: str, lines: int = 3) -> str:
    """A log's last non-empty lines on one line: a server's failure is usually at its end."""
    useful = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(useful[-lines:]) or "(empty log)"
