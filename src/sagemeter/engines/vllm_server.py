"""`vllm serve` on 127.0.0.1, started and stopped by sagemeter like the embedded engine.

Lifecycle: `start()` launches vLLM through `launcher` (so vLLM never outlives sagemeter),
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

import os
from pathlib import Path
from typing import Self

from sagemeter.engines.hf_export import ServedModel, check_vllm_checkpoint, served_model
from sagemeter.engines.launched import (
    LaunchedServer,
    WaitFn,
    answers_ok,
    listed_models,
    no_wait,
    tail,
)
from sagemeter.engines.startup_causes import VLLM_CAUSES, matched_cause
from sagemeter.engines.vllm_install import MANAGED_ORIGIN, VllmInstall, require_vllm
from sagemeter.errors import UserError
from sagemeter.paths import cache_dir, state_dir
from sagemeter.results import StartupFacts
from sagemeter.startup_log import parse_vllm_log

__all__ = ["VllmServer", "prepare_server"]

START_TIMEOUT_S = 900.0  # two busy cores compile for minutes
DEFAULT_MAX_MODEL_LEN = 2048
CPU_KV_CACHE_GIB = "4"  # vLLM's CPU build reserves this much RAM for the KV cache


class VllmServer(LaunchedServer):
    """One `vllm serve` process (and its engine processes) for one model folder."""

    what = "vLLM"
    # vLLM leaves its inter-process sockets and a file store in the temporary folder at every
    # start: the launcher gives it a private one and removes it afterwards (torch's compile
    # cache stays where torch keeps it: `environment`).
    scratch_env = "TMPDIR"

    def __init__(
        self,
        model: ServedModel,
        install: VllmInstall,
        *,
        log_path: Path,
        port: int = 0,
        max_model_len: int = DEFAULT_MAX_MODEL_LEN,
    ) -> None:
        super().__init__(log_path=log_path, port=port)
        self.model = model
        self.install = install
        self.max_model_len = max_model_len

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
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", torch_compile_cache())
        if self.install.origin == MANAGED_ORIGIN:
            env.setdefault("VLLM_CACHE_ROOT", str(cache_dir() / "engines" / "vllm-cache"))
        return env

    def start(self, timeout_s: float = START_TIMEOUT_S, on_wait: WaitFn = no_wait) -> str:
        """Start vLLM and return its OpenAI base URL (ending in /v1) once it lists the model."""
        return super().start(timeout_s, on_wait)

    def ready(self) -> bool:
        """vLLM answers /health and lists the model (it is still loading until then)."""
        return answers_ok(self.root_url + "/health") and (
            self.model.name in listed_models(self.root_url)
        )

    def exited(self, code: int) -> str:
        return f"vLLM exited while starting {self.model.name}"

    def failure_cause(self, log_text: str) -> str:
        """Why vLLM did not start, in words, from its own log (else the log's last lines)."""
        if not log_text:
            return "it left no log"
        cause = matched_cause(log_text, VLLM_CAUSES, port=self.port, model=self.model.folder)
        return cause or tail(log_text)

    def startup_facts(self) -> StartupFacts:
        return parse_vllm_log(self.log_text().splitlines(), origin=f"engine log {self.log_path}")

    def __enter__(self) -> Self:
        self.start()
        return self


def torch_compile_cache() -> str:
    """Where torch keeps its compile cache by default (the temporary folder's
    `torchinductor_USER`), said outright: vLLM's own temporary folder is a scratch one that goes
    with it, and the cache should stay warm from one start to the next."""
    import getpass
    import re
    import tempfile

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"
    return os.path.join(
        tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user)
    )


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
    extra_vllm_args()
    check_vllm_checkpoint(spec)
    require_vllm()


def default_log_path(name: str) -> Path:
    """Where a vLLM started outside a run folder keeps its log: the state dir's logs folder."""
    from datetime import UTC, datetime

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
    install = require_vllm()
    model = served_model(spec, install)
    return VllmServer(
        model,
        install,
        log_path=log_path or default_log_path(model.name),
        port=port,
        max_model_len=max_model_len,
    )
