"""`vllm serve` on 127.0.0.1, started and stopped by sagemeter like the embedded engine.

Lifecycle: `start()` launches vLLM through `vllm_launcher` (so vLLM never outlives sagemeter),
writes its whole output to a log file, waits until `/health` answers and the model is listed,
and, if vLLM exits first, fails with the cause its log names (`startup_causes`: port in use,
out of memory, no room for the KV cache, no model or no valid config), else the log's last
lines; `stop()` ends vLLM and every process it started. Use it as a context manager so an
exception or Ctrl-C never leaves one running.

On a CPU, vLLM compiles the model at start-up (about 90 s of the 140 s it takes on two cores);
the compiled code is cached (VLLM_CACHE_ROOT, in sagemeter's cache dir for sagemeter's own
environment), though vLLM 0.32's CPU build can fail to load it back and compile again.
`SAGEMETER_VLLM_ARGS` adds `vllm serve` flags (`--enforce-eager` skips the compiling).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from sagemeter.engines.hf_export import ServedModel
from sagemeter.engines.startup_causes import VLLM_CAUSES, matched_cause
from sagemeter.engines.startup_log import parse_vllm_log
from sagemeter.engines.vllm_install import MANAGED_ORIGIN, VllmInstall
from sagemeter.errors import UserError
from sagemeter.paths import cache_dir
from sagemeter.results import StartupFacts

START_TIMEOUT_S = 900.0  # two busy cores compile for minutes
DEFAULT_MAX_MODEL_LEN = 2048
CPU_KV_CACHE_GIB = "4"  # vLLM's CPU build reserves this much RAM for the KV cache
WaitFn = Callable[[float], None]


def _no_wait(_: float) -> None:
    """Default: nothing to show while vLLM starts."""


def free_port() -> int:
    """A port free on 127.0.0.1 now (vLLM takes a port number, not 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class VllmServer:
    """One `vllm serve` process (and its engine processes) for one model folder."""

    def __init__(
        self,
        model: ServedModel,
        install: VllmInstall,
        *,
        log_path: Path,
        port: int = 0,
        max_model_len: int = DEFAULT_MAX_MODEL_LEN,
    ) -> None:
        self.model = model
        self.install = install
        self.log_path = log_path
        self.port = port or free_port()
        self.max_model_len = max_model_len
        self.base_url: str | None = None
        self.started_s: float | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The `vllm serve` command line (also written at the top of the log)."""
        return [
            str(self.install.executable),
            "serve",
            str(self.model.folder),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--served-model-name",
            self.model.name,
            "--max-model-len",
            str(self.max_model_len),
            "--dtype",
            self.model.dtype,
            # Lets sagemeter read the chat template the server uses (for its checksum).
            "--enable-tokenizer-info-endpoint",
            *extra_vllm_args(),
        ]

    def environment(self) -> dict[str, str]:
        """vLLM's environment: no usage reports, no hub look-ups for a local folder, and the
        compile cache and KV cache size set where the user has not set them."""
        env = {**os.environ, "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
        env["HF_HUB_OFFLINE"] = "1"  # every model vllm: serves is a local folder
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", CPU_KV_CACHE_GIB)
        if self.install.origin == MANAGED_ORIGIN:
            env.setdefault("VLLM_CACHE_ROOT", str(cache_dir() / "engines" / "vllm-cache"))
        return env

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout_s: float = START_TIMEOUT_S, on_wait: WaitFn = _no_wait) -> str:
        """Start vLLM and return its OpenAI base URL (ending in /v1) once it answers."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        began = time.perf_counter()
        with self.log_path.open("wb") as log:
            log.write(f"$ {' '.join(self.command())}\n".encode())
            log.flush()
            self._process = subprocess.Popen(
                [sys.executable, "-m", "sagemeter.engines.vllm_launcher", *self.command()],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.environment(),
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

    def _serves_model(self) -> bool:
        """vLLM answers /health and lists the model (it is still loading until then)."""
        try:
            with urllib.request.urlopen(self.root_url + "/health", timeout=5.0) as health:
                if health.status != 200:
                    return False
            with urllib.request.urlopen(self.root_url + "/v1/models", timeout=5.0) as answer:
                listed = json.loads(answer.read())
        except (urllib.error.URLError, OSError, ValueError):
            return False
        models = listed.get("data") if isinstance(listed, dict) else None
        return isinstance(models, list) and any(
            isinstance(m, dict) and m.get("id") == self.model.name for m in models
        )

    def _wait_ready(self, deadline: float, began: float, on_wait: WaitFn) -> None:
        assert self._process is not None
        while time.perf_counter() < deadline:
            if self._process.poll() is not None:
                raise UserError(
                    f"vLLM exited while starting {self.model.name}: {self._failure_cause()} "
                    f"(log {self.log_path})"
                )
            if self._serves_model():
                return
            on_wait(time.perf_counter() - began)
            time.sleep(0.5)
        raise UserError(
            f"vLLM did not answer within {deadline - began:.0f} s; log {self.log_path}: "
            f"{self._failure_cause()}"
        )

    def _failure_cause(self) -> str:
        """Why vLLM did not start, in words, from its own log (else the log's last lines)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "it left no log"
        cause = matched_cause(text, VLLM_CAUSES, port=self.port, model=self.model.folder)
        return cause or _tail(text)

    def stop(self, timeout_s: float = 30.0) -> None:
        """End vLLM: close the launcher's stdin (vLLM's own shutdown), then kill the group."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None and process.stdin:
            process.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=timeout_s)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # whatever is left of the group
        process.wait()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def startup_facts(self) -> StartupFacts:
        return parse_vllm_log(self.log_text().splitlines(), origin=f"engine log {self.log_path}")

    def __enter__(self) -> VllmServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


EXTRA_ARGS_ENV = "SAGEMETER_VLLM_ARGS"
# sagemeter's own: a local server binds 127.0.0.1 on the port sagemeter chose.
_OWN_FLAGS = ("--host", "--port")


def extra_vllm_args() -> list[str]:
    """`SAGEMETER_VLLM_ARGS`, split as a shell would: more `vllm serve` flags for every vLLM
    sagemeter starts (e.g. `--enforce-eager`, which skips the CPU build's minutes of
    compiling). The log's first line shows the whole command, so a result says how it ran."""
    import shlex

    text = os.environ.get(EXTRA_ARGS_ENV, "")
    try:
        args = shlex.split(text)
    except ValueError as exc:
        raise UserError(f"{EXTRA_ARGS_ENV}: {exc}; quote as a shell would") from None
    for flag in (arg.split("=", 1)[0] for arg in args):
        if flag in _OWN_FLAGS:
            raise UserError(
                f"{EXTRA_ARGS_ENV}: {flag} is sagemeter's own (it binds 127.0.0.1 on a port it "
                "chooses); leave it out"
            )
    return args


def check_vllm_target(spec: str) -> None:
    """Fail before any work when `vllm:SPEC` cannot run: no vLLM, a checkpoint it can't take, or
    extra flags sagemeter cannot pass."""
    from sagemeter.engines.hf_export import check_vllm_checkpoint
    from sagemeter.engines.vllm_install import require_vllm

    extra_vllm_args()
    check_vllm_checkpoint(spec)
    require_vllm()


def default_log_path(name: str) -> Path:
    """Where a vLLM started outside a run folder keeps its log: the state dir's logs folder."""
    from datetime import UTC, datetime

    from sagemeter.paths import state_dir

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return state_dir() / "logs" / f"vllm-{name}-{stamp}.log"


def prepare_server(
    spec: str,
    *,
    log_path: Path | None = None,
    port: int = 0,
    max_model_len: int = DEFAULT_MAX_MODEL_LEN,
) -> VllmServer:
    """A server for `vllm:SPEC`, not yet started: vLLM found, the checkpoint exported (once)."""
    from sagemeter.engines.hf_export import served_model
    from sagemeter.engines.vllm_install import require_vllm

    install = require_vllm()
    model = served_model(spec, install)
    return VllmServer(
        model,
        install,
        log_path=log_path or default_log_path(model.name),
        port=port,
        max_model_len=max_model_len,
    )


def _tail(text: str, lines: int = 3) -> str:
    """A log's last non-empty lines on one line: vLLM's failure is usually at its end."""
    useful = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(useful[-lines:]) or "(empty log)"
