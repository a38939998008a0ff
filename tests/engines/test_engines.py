"""Which vLLM sagemeter runs, the managed install's idempotence, and vllm: targets refused before
any work (no vLLM, a checkpoint vLLM cannot take). No vLLM is started here."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sagemeter.engines import vllm_install
from sagemeter.engines.checkpoints import resolve_checkpoint
from sagemeter.engines.llamacpp import THREADS_VARIABLE, LocalEngine, engine_threads
from sagemeter.engines.vllm_install import (
    MANAGED_ORIGIN,
    SERVING_MODULES,
    STAMP_NAME,
    VllmInstall,
    find_vllm,
    install_vllm,
    managed_dir,
    require_vllm,
)
from sagemeter.errors import UserError
from tests import cli_run


def fake_vllm(folder: Path) -> Path:
    """An executable named vllm whose #! line names this Python, as pip writes console scripts."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "vllm"
    script.write_text(f"#!{sys.executable}\nprint('vllm stand-in')\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def without_vllm_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SAGEMETER_VLLM", raising=False)
    monkeypatch.setenv("PATH", os.pathsep.join(["/usr/bin", "/bin"]))


def test_lookup_order_override_then_path_then_sagemeters_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_vllm_on_path(monkeypatch)
    assert find_vllm() is None
    with pytest.raises(UserError, match=r"run `sagemeter engines install vllm`"):
        require_vllm()
    managed = fake_vllm(managed_dir() / "bin")
    (managed.parent / "python").symlink_to(sys.executable)
    (managed_dir() / STAMP_NAME).write_text(json.dumps({"packages": ["other==1"]}))
    assert find_vllm() is None  # made with other pins: not ours any more
    (managed_dir() / STAMP_NAME).write_text(json.dumps({"packages": vllm_install._pins()}))
    found = find_vllm()
    assert found is not None and found.origin == "sagemeter's environment"
    assert found.executable == managed
    on_path = fake_vllm(tmp_path / "user-bin")
    monkeypatch.setenv("PATH", f"{on_path.parent}{os.pathsep}/usr/bin")
    found = find_vllm()
    assert found is not None and (found.executable, found.origin) == (on_path, "PATH")
    assert found.python == Path(sys.executable)
    override = fake_vllm(tmp_path / "elsewhere")
    monkeypatch.setenv("SAGEMETER_VLLM", str(override))
    found = find_vllm()
    assert found is not None and (found.executable, found.origin) == (override, "SAGEMETER_VLLM")
    monkeypatch.setenv("SAGEMETER_VLLM", str(tmp_path / "missing"))
    with pytest.raises(UserError, match=r"SAGEMETER_VLLM=.*no such file"):
        find_vllm()


def test_install_is_a_no_op_when_the_environment_is_there(monkeypatch: pytest.MonkeyPatch) -> None:
    without_vllm_on_path(monkeypatch)
    managed = fake_vllm(managed_dir() / "bin")
    (managed.parent / "python").symlink_to(sys.executable)
    (managed_dir() / STAMP_NAME).write_text(json.dumps({"packages": vllm_install._pins()}))
    began = time.perf_counter()
    outcome = install_vllm()
    assert outcome.already and outcome.install.executable == managed
    assert time.perf_counter() - began < 5  # nothing was installed


def stand_in_vllm(site: Path, leave_out: str = "") -> None:
    """A `vllm` package of empty modules named as vLLM's serving ones, without bytecode."""
    for module in ("vllm", *SERVING_MODULES):
        if module == leave_out:
            continue
        parts = module.split(".")
        for depth in range(1, len(parts) + 1):
            package = site.joinpath(*parts[:depth])
            package.mkdir(parents=True, exist_ok=True)
            (package / "__init__.py").touch()
    (site / "vllm" / "__init__.py").write_text("__version__ = '0.32.0'\n")
    # vLLM logs to stdout, and its serving modules log as they import
    core = site.joinpath("vllm", "v1", "engine", "core", "__init__.py")
    if core.exists():
        core.write_text("print('INFO 12-07 01:00:00 [core.py:1] a log line on stdout')\n")


def test_the_install_check_imports_the_serving_modules_and_writes_their_bytecode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip installs vLLM with --no-compile; the check imports what `vllm serve` runs, which
    caches their bytecode, even where the caller's environment says not to write any."""
    stand_in_vllm(tmp_path / "site")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)  # the bytecode beside its source
    install = VllmInstall(Path(sys.executable), Path(sys.executable), MANAGED_ORIGIN)
    assert vllm_install._check_import(install, tmp_path / "install.log") == "0.32.0"
    for module in ("vllm", *SERVING_MODULES):
        cached = tmp_path.joinpath("site", *module.split("."), "__pycache__")
        assert list(cached.glob("__init__.*.pyc")), f"{module} was not compiled"


def test_an_install_whose_serving_path_does_not_import_is_one_line_naming_the_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in_vllm(tmp_path / "site", leave_out="vllm.v1.worker.cpu_worker")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    install = VllmInstall(Path(sys.executable), Path(sys.executable), MANAGED_ORIGIN)
    log = tmp_path / "install.log"
    log.write_text("pip's output\n")
    with pytest.raises(UserError, match=r"does not import: .*vllm\.v1\.worker") as raised:
        vllm_install._check_import(install, log)
    assert "\n" not in str(raised.value) and "Traceback" in log.read_text()


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagemeter", *args],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "200"},
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_vllm_targets_are_refused_before_any_work(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    env = {k: v for k, v in sagemeter_env.items() if k != "SAGEMETER_VLLM"}
    env["PATH"] = os.pathsep.join(["/usr/bin", "/bin"])
    out = tmp_path / "out"
    cases = [
        (["measure", str(out), "vllm:smollm2-f32"], "vLLM is not installed"),
        (["measure", str(out), "vllm:smollm2-q4_1"], "vLLM does not run llama.cpp's 4-bit blocks"),
        (["measure", str(out), f"vllm:{tmp_path}"], "has no config.json"),
        (["measure", str(out), "vllm:nonesuch"], "vllm:nonesuch: unknown checkpoint"),
        (["serve", "vllm:smollm2-q4_1"], "vllm:smollm2-f32 serves the same weights"),
        (["load", "vllm:smollm2-f32"], "vLLM is not installed"),
        (["engines", "install", "sglang"], "unknown engine 'sglang'; installable: vllm"),
    ]
    for args, needle in cases:
        done = run_cli(env, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert needle in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
    assert not out.exists()
    listed = run_cli(env, "engines", "list")
    assert listed.returncode == 0 and "vllm: not installed" in listed.stdout


def test_a_hugging_face_folder_is_served_as_it_is(tmp_path: Path) -> None:
    from sagemeter.engines.hf_export import check_vllm_checkpoint, served_model
    from sagemeter.engines.vllm_install import VllmInstall

    folder = tmp_path / "My-Model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    check_vllm_checkpoint(str(folder))
    install = VllmInstall(Path(sys.executable), Path(sys.executable), "PATH")
    model = served_model(str(folder), install)  # nothing to export: no vLLM Python is run
    assert (model.name, model.folder, model.dtype, model.source) == (
        "My-Model",
        folder.resolve(),
        "auto",
        None,
    )


def test_extra_vllm_flags_come_last_and_sagemeters_own_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sagemeter_env: dict[str, str]
) -> None:
    from sagemeter.engines.hf_export import served_model
    from sagemeter.engines.vllm_install import VllmInstall
    from sagemeter.engines.vllm_server import VllmServer

    folder = tmp_path / "M"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    install = VllmInstall(Path(sys.executable), Path(sys.executable), "PATH")
    server = VllmServer(served_model(str(folder), install), install, log_path=tmp_path / "l")
    monkeypatch.setenv("SAGEMETER_VLLM_ARGS", "--enforce-eager --max-num-seqs 4")
    command = server.command()
    assert command[-3:] == ["--enforce-eager", "--max-num-seqs", "4"]
    assert command[command.index("--host") + 1] == "127.0.0.1"
    monkeypatch.delenv("SAGEMETER_VLLM_ARGS")
    assert "--enforce-eager" not in server.command()
    # Refused in one line before any work, on every face that starts vLLM.
    env = {k: v for k, v in sagemeter_env.items() if k != "SAGEMETER_VLLM"}
    out = tmp_path / "out"
    measure = ["measure", str(out), "vllm:smollm2-f32"]
    for extra, args, needle in (
        ("--port=9", measure, "SAGEMETER_VLLM_ARGS: --port is sagemeter's own"),
        ("--host 0.0.0.0", measure, "SAGEMETER_VLLM_ARGS: --host is sagemeter's own"),
        ('--chat-template "x', ["serve", "vllm:smollm2-f32"], "No closing quotation"),
    ):
        done = run_cli({**env, "SAGEMETER_VLLM_ARGS": extra}, *args)
        assert done.returncode == 2, (extra, args, done.stderr)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and needle in lines[0], (extra, done.stderr)
    assert not out.exists()


def test_serve_and_measure_give_the_embedded_engine_one_context_per_slot() -> None:
    """One checkpoint, one KV cache size: serve's default slot is measure's at its defaults."""
    import inspect

    from sagemeter.engines.endpoints import slot_context
    from sagemeter.engines.llamacpp import DEFAULT_CTX_PER_SLOT, LocalEngine
    from sagemeter.settings import measure_settings

    defaults = measure_settings(False, {})
    engine_default = inspect.signature(LocalEngine).parameters["ctx_per_slot"].default
    assert slot_context(defaults.max_reply_tokens) == DEFAULT_CTX_PER_SLOT == engine_default
    assert slot_context(2000) == 2560  # a longer reply gets the room it needs


@pytest.mark.parametrize("given", ["0", "two", "1025", "-1"])
def test_a_bad_thread_count_is_one_line_before_any_engine_starts(
    tmp_path: Path, given: str
) -> None:
    """SAGEMETER_LLAMA_THREADS is checked as the target is: every command that would start an
    embedded engine says so in one line, exit 2, and nothing is written or started."""
    env = {**os.environ, "SAGEMETER_HOME": str(tmp_path / "home"), THREADS_VARIABLE: given}
    out = tmp_path / "out"
    for args in (
        ["measure", str(out), "local:smollm2-q4_1"],
        ["load", "local:smollm2-q4_1", "--out", str(out)],
        ["serve", "local:smollm2-q4_1"],
    ):
        done = cli_run.invoke(args, env)
        assert done.returncode == 2, (args, done.stderr)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and f"SAGEMETER_LLAMA_THREADS={given!r}" in lines[0], done.stderr
    assert not out.exists()


def test_the_thread_count_reaches_every_embedded_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint = resolve_checkpoint("smollm2-q4_1")
    monkeypatch.setenv(THREADS_VARIABLE, "3")
    assert engine_threads() == 3 and LocalEngine(checkpoint).threads == 3
    assert LocalEngine(checkpoint, threads=1).threads == 1  # a caller's own choice wins
    monkeypatch.setenv(THREADS_VARIABLE, "")
    assert LocalEngine(checkpoint).threads == -1  # unset or empty: llama.cpp's every core
    monkeypatch.delenv(THREADS_VARIABLE)
    assert engine_threads() == -1
