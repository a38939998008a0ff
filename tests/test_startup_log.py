from __future__ import annotations

from sagemeter.backends.local import LocalEngine
from sagemeter.startup_log import parse_llamacpp_log, parse_vllm_log

BF16_LINES = [
    "INFO 09-25 18:30:01 [gpu_model_runner.py:1] Model loading took 9.75 GiB memory and 82.751806 seconds",
    "INFO 09-25 18:30:09 [kv_cache_utils.py:1] GPU KV cache size: 723,484 tokens",
    "INFO 09-25 18:30:09 [kv_cache_utils.py:1] Maximum concurrency for 8,192 tokens per request: 88.32x",
]
QAT_LINES = [
    "INFO Initializing a V1 LLM engine with config: model='google/gemma-4-E2B-it-qat-w4a16-ct', "
    "quantization=compressed-tensors, enforce_eager=False",
    "Model loading took 8.01 GiB memory and 66.190265 seconds",
    "GPU KV cache size: 867,999 tokens",
    "Maximum concurrency for 8,192 tokens per request: 105.96x",
]


def test_vllm_lines_quoted_by_the_article() -> None:
    bf16 = parse_vllm_log(BF16_LINES)
    assert (bf16.weights_gib, bf16.load_seconds, bf16.kv_cache_tokens) == (9.75, 82.751806, 723484)
    assert bf16.max_concurrency == 88.32
    assert bf16.max_concurrency_tokens_per_request == 8192
    assert bf16.quantization is None
    assert len(bf16.lines) == 3
    qat = parse_vllm_log(QAT_LINES)
    assert (qat.weights_gib, qat.load_seconds, qat.kv_cache_tokens) == (8.01, 66.190265, 867999)
    assert qat.max_concurrency == 105.96
    assert qat.quantization == "compressed-tensors"


def test_vllm_log_without_facts_leaves_them_unknown() -> None:
    facts = parse_vllm_log(["INFO starting server", "Uvicorn running on 0.0.0.0:8080"])
    assert facts.weights_gib is None and facts.kv_cache_tokens is None and facts.lines == []


def test_real_engine_log_gives_llamacpp_facts(engine: LocalEngine) -> None:
    facts = engine.startup_facts()
    assert facts.source == "llama.cpp log"
    assert facts.weights_gib is not None
    assert 0.08 < facts.weights_gib < 0.1  # the 92 MiB Q4_1 file
    assert facts.kv_cache_tokens == 16 * engine.ctx_per_slot
    assert facts.max_concurrency == 16
    assert facts.quantization == "Q4_1"
    assert facts.load_seconds is not None and facts.load_seconds > 0


def test_llamacpp_sample_lines() -> None:
    lines = [
        "0.00.007.618 I srv          init: loading model",
        "0.00.497.949 I print_info: file type   = all F32",
        "0.00.750.511 I load_tensors:   CPU_Mapped model buffer size =   513.13 MiB",
        "0.00.756.862 I llama_context: n_ctx                 = 32768",
        "0.00.756.863 I llama_context: n_ctx_seq             = 2048",
        "0.02.871.155 I srv    load_model: initializing, n_slots = 16, n_ctx_slot = 2048, kv_unified = 'false'",
        "1.02.878.212 I srv          init: model loaded",
    ]
    facts = parse_llamacpp_log(lines)
    assert facts.weights_gib == round(513.13 / 1024, 4)
    assert facts.kv_cache_tokens == 32768
    assert facts.quantization == "all F32"
    assert facts.load_seconds == round(62.878212 - 0.007618, 3)
