"""Shared fixtures: per-test state isolation, and one real embedded engine for the session."""

from __future__ import annotations

import fcntl
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click.testing
import pytest
import typer.testing

from sagemeter.engines.checkpoints import resolve_checkpoint
from sagemeter.engines.llamacpp import THREADS_VARIABLE, LocalEngine
from tests.busy_host import client_limits_named
from tests.typer_builds import keep_builds

# The AWS wire fakes (moto's server, Service Quotas/Pricing and runtime fakes) as fixtures, the
# `quiet` marker's turns (a test the other xdist workers hold off for), `long` modules first, and
# the files of the `alone` tests a tier's workers part deselected (its second part's to collect).
pytest_plugins = (
    "tests.sagemaker_fakes",
    "tests.quiet_turns",
    "tests.long_modules",
    "tests.alone_files",
)


def _naming_client_limits(plain: Callable[[Any], str]) -> Callable[[Any], str]:
    """A CliRunner result's repr (what a failed `assert result.exit_code == 0` shows) with the
    client rules its output gave as reasons, so the suite runs such a failure again (see
    tests/cli_run.py's Completed). Click and typer each have their own Result."""

    def described(result: Any) -> str:
        named = client_limits_named(result.output)
        return plain(result) + (f" naming {', '.join(named)}" if named else "")

    return described


for _result in (click.testing.Result, typer.testing.Result):
    _result.__repr__ = _naming_client_limits(_result.__repr__)  # type: ignore[method-assign]
keep_builds()  # CliRunner().invoke(APP, …) builds APP's click command once, not every time

# Every embedded engine the tests start (the session's below, and those `measure local:`, `demo`,
# `serve`, plans and the MCP tools start in the commands the tests run, which inherit this
# environment) decodes on one llama.cpp thread: see `engine` for why. `make test` keeps one for
# the slow tier too (SLOW_ENGINE_THREADS), whose two workers each drive an engine.
os.environ.setdefault(THREADS_VARIABLE, "1")


def pytest_configure(config: pytest.Config) -> None:
    """Processes the tests start take Ctrl-C, however the run itself was started.

    A shell starts a background job (`make test &`, `cmd &` in a script or a subshell) with
    SIGINT ignored, as POSIX asks, and every process under it inherits the ignore: Python then
    installs no Ctrl-C handler, and each test that sends a real `sagemeter` SIGINT (a Ctrl-C
    or `serve` test) waits in vain until its timeout. The tests send SIGINT as a user's terminal
    delivers it, to a process that takes it: the ignore is undone here, in pytest and in each
    xdist worker, before any worker or child starts."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


# The source article's figures and data, shipped with the project (examples/, see its README).
REFERENCE_DIR = Path(__file__).resolve().parents[1] / "examples" / "article-gemma-4-e2b-l4"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own SAGEMETER_HOME so no state leaks between tests or to the user."""
    home = tmp_path / "sagemeter-home"
    monkeypatch.setenv("SAGEMETER_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def shared_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session-wide SAGEMETER_HOME for the derived 32-bit checkpoint (derived once, ~20 s)."""
    return tmp_path_factory.mktemp("shared-home")


@pytest.fixture(scope="session")
def q4_path() -> Path:
    return resolve_checkpoint("smollm2-q4_1").path


def made_once_per_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], object]
) -> Path:
    """A folder of files `make(folder)` writes, made once for the whole run: pytest-xdist's
    workers share the first one's (a lock in the run's common temp folder), each getting hard
    links in a folder of its own, so a derived checkpoint is not derived again on every worker."""
    own = tmp_path_factory.mktemp(name)
    base = tmp_path_factory.getbasetemp()
    shared_root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    shared = shared_root / f"{name}-made-once"
    with open(shared_root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared_root / f"{name}.made").exists():
            make(shared)
            (shared_root / f"{name}.made").touch()
    for path in shared.iterdir():
        os.link(path, own / path.name)
    return own


@pytest.fixture(scope="session")
def f32_folder(q4_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 4-bit GGUF widened to a Hugging Face safetensors folder, made once for the run
    (about 20 s; read-only to every test)."""
    from tests.checkpoint_files import write_hf_safetensors

    return made_once_per_run(
        tmp_path_factory, "smollm2-f32-hf", lambda folder: write_hf_safetensors(q4_path, folder)
    )


@pytest.fixture(scope="session")
def ct_folder(q4_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same weights as a 4-bit compressed-tensors folder, made once for the run."""
    from tests.checkpoint_files import write_compressed_tensors

    return made_once_per_run(
        tmp_path_factory, "smollm2-w4-ct", lambda folder: write_compressed_tensors(q4_path, folder)
    )


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEngine]:
    """The embedded engine on the shipped 4-bit checkpoint, started once for the whole session.

    One llama.cpp thread: the tests share two cores with pytest workers, their clients and other
    servers, and llama.cpp's threads wait for each other by spinning, so two of them on a busy
    host make each token many times slower (the fidelity tests: about 8 s with one thread against
    45-70 s with two, side by side on a loaded host)."""
    log = tmp_path_factory.mktemp("engine") / "engine.log"
    local = LocalEngine(
        resolve_checkpoint("smollm2-q4_1"),
        parallel=16,
        threads=1,
        log_path=log,
    )
    local.start()
    yield local
    local.stop()


@pytest.fixture(scope="session")
def engine_url(engine: LocalEngine) -> str:
    assert engine.base_url is not None
    return engine.base_url


def reference_file(name: str) -> Path:
    path = REFERENCE_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"the article's file {path} is missing from examples/")
    return path


@pytest.fixture
def sagemeter_env(isolated_home: Path) -> dict[str, str]:
    """Environment for running the installed `sagemeter` command in a subprocess."""
    return {**os.environ, "SAGEMETER_HOME": str(isolated_home)}
