"""Why an engine could not start, from its log: the cause tables on lines in the engines' own
formats (vLLM 0.32's messages as its source writes them, with the process prefixes its
multi-process logging adds), and the whole path from a `vllm` that fails to the one line shown."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sagemeter.engines.hf_export import ServedModel
from sagemeter.engines.startup_causes import (
    LLAMACPP_CAUSES,
    OUT_OF_MEMORY,
    VLLM_CAUSES,
    failure_cause,
    matched_cause,
)
from sagemeter.engines.vllm_install import VllmInstall
from sagemeter.engines.vllm_server import VllmServer
from sagemeter.errors import UserError

MODEL = "/models/smollm2-f32"
API = "(APIServer pid=4123)"
CORE = "(EngineCore_DP0 pid=4188)"
START = f"{API} INFO 12-03 13:58:01 [utils.py:253] non-default args: {{'model': '{MODEL}'}}"
CORE_FAILED = (
    f"{API} RuntimeError: Engine core initialization failed. See root cause above. "
    "Failed core proc(s): {'EngineCore_DP0': 1}"
)
RETRIED = (
    f"{CORE} WARNING 12-03 13:58:09 [parallel.py:746] Address already in use. "
    "Retrying with a new port."
)

VLLM_LOGS = {
    "port in use": (
        [
            START,
            f"{API} Traceback (most recent call last):",
            f'{API}   File "/venv/vllm/entrypoints/launchers/launcher.py", line 348, in '
            "create_server_socket",
            f"{API}     sock.bind(addr)",
            f"{API} OSError: [Errno 98] Address already in use",
        ],
        "port 8123 on 127.0.0.1 is already in use",
    ),
    "no memory for the KV cache": (
        [
            START,
            f"{CORE} INFO 12-03 13:59:40 [default_loader.py:291] Loading weights took 0.41 s",
            f"{CORE} ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine (this flag also controls CPU "
            "memory reservation on the CPU backend, despite its name).",
            CORE_FAILED,
        ],
        "no memory is left for the KV cache once the model is loaded",
    ),
    "KV cache space above free memory": (
        [
            START,
            f"{CORE} ValueError: Available memory on node 0 (1.52/7.75 GiB) on kv cache "
            "allocation is less than requested memory for kv (4.00 GiB). Decrease "
            "--kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by other "
            "processes.",
            CORE_FAILED,
        ],
        "VLLM_CPU_KVCACHE_SPACE asks for more memory than is free",
    ),
    "CUDA out of memory": (
        [
            START,
            f"{CORE} torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
            "GPU 0 has a total capacity of 22.05 GiB of which 1.12 GiB is free.",
            CORE_FAILED,
        ],
        OUT_OF_MEMORY,
    ),
    "CPU out of memory": (
        [
            START,
            f"{CORE} RuntimeError: [enforce fail at alloc_cpu.cpp:121] data. DefaultCPUAllocator: "
            "can't allocate memory: you tried to allocate 8589934592 bytes. Error code 12 "
            "(Cannot allocate memory)",
            CORE_FAILED,
        ],
        OUT_OF_MEMORY,
    ),
    "model not found": (
        [
            START,
            f"{API} ValueError: Invalid repository ID or local directory specified: '{MODEL}'.",
            f"{API} Please verify the following requirements:",
            f"{API} 1. Provide a valid Hugging Face repository ID.",
        ],
        f"vLLM found no model at {MODEL} (a folder with config.json, or a Hugging Face repo)",
    ),
    "not a valid config, after a retried internal port": (
        [
            START,
            RETRIED,
            f"{API} ValueError: Unrecognized model in {MODEL}. Should have a `model_type` key in "
            "its config.json.",
        ],
        f"{MODEL} has no valid model config (config.json names no model_type vLLM knows)",
    ),
}


@pytest.mark.parametrize("case", list(VLLM_LOGS))
def test_vllm_log_lines_name_their_cause(case: str) -> None:
    lines, expected = VLLM_LOGS[case]
    cause = matched_cause("\n".join(lines), VLLM_CAUSES, port=8123, model=MODEL)
    assert cause is not None and cause.startswith(expected), cause


def test_a_retried_internal_port_alone_is_no_cause() -> None:
    """vLLM retries its own ports and goes on: that warning must not read as the failure."""
    assert matched_cause("\n".join([START, RETRIED]), VLLM_CAUSES, port=1, model=MODEL) is None


def test_llamacpp_out_of_memory_is_named() -> None:
    log = "\n".join(
        [
            "llama_model_loader: loaded meta data with 33 key-value pairs and 272 tensors",
            "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size "
            "17179869216",
            "llama_init_from_model: failed to initialize the context: failed to allocate buffer "
            "for kv cache",
        ]
    )
    assert failure_cause(log, LLAMACPP_CAUSES, port=1, file="m.gguf") == OUT_OF_MEMORY


def test_llamacpp_without_a_known_cause_shows_its_last_error_line() -> None:
    log = (
        "0.00.012.001 I main: loading model\n"
        "0.00.412.377 E srv    load_model: something new went wrong\n"
        "0.00.412.390 I main: exiting"
    )
    cause = failure_cause(log, LLAMACPP_CAUSES, port=1, file="m.gguf")
    assert cause == "0.00.412.377 E srv load_model: something new went wrong"  # one line


def _failing_vllm(tmp_path: Path, lines: list[str]) -> VllmInstall:
    """A `vllm` that writes a real failure's lines and exits 1, as vLLM does (no vLLM started)."""
    script = tmp_path / "vllm"
    body = "\n".join(lines)
    script.write_text(f"#!{sys.executable}\nimport sys\nprint({body!r})\nsys.exit(1)\n")
    script.chmod(0o755)
    return VllmInstall(executable=script, python=Path(sys.executable), origin="SAGEMETER_VLLM")


def test_a_vllm_that_exits_while_starting_says_why_in_one_line(tmp_path: Path) -> None:
    lines, _ = VLLM_LOGS["no memory for the KV cache"]
    model = ServedModel(name="smollm2-f32", folder=tmp_path, dtype="float32", description="x")
    log = tmp_path / "vllm.log"
    server = VllmServer(model, _failing_vllm(tmp_path, lines), log_path=log)
    with pytest.raises(UserError) as caught:
        server.start(timeout_s=60)
    message = str(caught.value)
    assert message.startswith("vLLM exited while starting smollm2-f32: no memory is left for")
    assert message.endswith(f"(log {log})") and "\n" not in message
    assert not server.is_running()


FAKE_VLLM = """
import http.server, json, sys
args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
name = args[args.index("--served-model-name") + 1]

class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"" if self.path == "/health" else json.dumps({"data": [{"id": name}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

http.server.HTTPServer(("127.0.0.1", port), Answer).serve_forever()
"""


def test_a_vllm_whose_health_answer_is_empty_is_ready_once_it_lists_the_model(
    tmp_path: Path,
) -> None:
    """vLLM's /health is 200 with no body: ready means that, plus the model in /v1/models."""
    script = tmp_path / "vllm"
    script.write_text(f"#!{sys.executable}\n{FAKE_VLLM}")
    script.chmod(0o755)
    install = VllmInstall(executable=script, python=Path(sys.executable), origin="SAGEMETER_VLLM")
    model = ServedModel(name="smollm2-f32", folder=tmp_path, dtype="float32", description="x")
    server = VllmServer(model, install, log_path=tmp_path / "vllm.log")
    try:
        assert server.start(timeout_s=30) == f"http://127.0.0.1:{server.port}/v1"
    finally:
        server.stop(timeout_s=5)
    assert not server.is_running()
