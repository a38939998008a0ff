from __future__ import annotations

from sagemeter.engines.llamacpp import LocalEngine
from sagemeter.startup_log import (
    parse_llamacpp_log,
    parse_sglang_log,
    parse_startup_log,
    parse_vllm_log,
)

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


# vLLM 0.32's CPU build, as it printed them serving smollm2-f32 on a 2-core x86 machine.
CPU_LINES = [
    "(APIServer pid=12355) INFO 12-03 09:46:12 [api_utils.py:286] non-default args: {'model_tag': '/tmp/out', 'host': '127.0.0.1', 'dtype': 'float32', 'max_model_len': 2048}",
    "(EngineCore pid=12976) INFO 12-03 09:46:26 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: model='/tmp/out', speculative_config=None, tokenizer='/tmp/out', dtype=torch.float32, quantization=None, enforce_eager=False",
    "(Worker pid=13135) INFO 12-03 09:46:32 [weight_utils.py:1108] Filesystem type for checkpoints: EXT4. Checkpoint size: 0.50 GiB. Available RAM: 20.60 GiB.",
    "(Worker pid=13135) INFO 12-03 09:46:33 [default_loader.py:501] Loading weights took 1.49 seconds",
    "(EngineCore pid=12976) INFO 12-03 09:47:33 [kv_cache_utils.py:2327] CPU KV cache size: 93,184 tokens, Maximum concurrency for 2,048 tokens per request: 45.50x",
]
NEW_GPU_ONE_LINE = "INFO 10-01 12:00:00 [kv_cache_utils.py:2327] GPU KV cache size: 867,999 tokens, Maximum concurrency for 8,192 tokens per request: 105.96x"


def test_vllm_cpu_build_lines() -> None:
    facts = parse_vllm_log(CPU_LINES, origin="--server-log vllm.log")
    assert facts.weights_gib == 0.50
    assert facts.load_seconds == 1.49
    assert facts.kv_cache_tokens == 93184
    assert facts.max_concurrency == 45.50
    assert facts.max_concurrency_tokens_per_request == 2048
    assert facts.quantization is None
    assert facts.source == "vllm log (--server-log vllm.log)"
    assert facts.startups_in_log == 1
    assert len(facts.lines) == 4  # the engine banner (quantization=None) and three facts


def test_vllm_new_one_line_kv_cache_and_concurrency() -> None:
    facts = parse_vllm_log([NEW_GPU_ONE_LINE])
    assert facts.kv_cache_tokens == 867999
    assert facts.max_concurrency == 105.96
    assert facts.max_concurrency_tokens_per_request == 8192


def test_vllm_gpu_model_loading_wins_over_checkpoint_size_and_weight_time() -> None:
    lines = [
        "Checkpoint size: 9.31 GiB. Available RAM: 100 GiB.",
        "Loading weights took 70.10 seconds",
        "Model loading took 9.75 GiB memory and 82.751806 seconds",
    ]
    facts = parse_vllm_log(lines)
    assert (facts.weights_gib, facts.load_seconds) == (9.75, 82.751806)


def test_vllm_log_with_several_startups_reports_the_newest() -> None:
    first = [
        "INFO vLLM API server version 0.30.0",
        "INFO Initializing a V1 LLM engine (v0.30.0) with config: model='a', quantization=fp8,",
        *BF16_LINES,
    ]
    second = [
        "INFO vLLM API server version 0.32.0",
        "INFO Initializing a V1 LLM engine (v0.32.0) with config: model='b', quantization=None,",
        "Model loading took 8.01 GiB memory and 66.190265 seconds",
        NEW_GPU_ONE_LINE,
    ]
    facts = parse_vllm_log([*first, *second])
    assert facts.startups_in_log == 2
    assert (facts.weights_gib, facts.load_seconds) == (8.01, 66.190265)
    assert facts.kv_cache_tokens == 867999 and facts.max_concurrency == 105.96
    assert facts.quantization is None  # the fp8 of the older start-up does not leak in
    assert all("9.75" not in line for line in facts.lines)


def test_a_newest_startup_without_facts_yet_reports_none_of_the_old_ones() -> None:
    facts = parse_vllm_log([*BF16_LINES, "INFO vLLM API server version 0.32.0"])
    assert facts.startups_in_log == 2
    assert facts.weights_gib is None and facts.kv_cache_tokens is None


def test_sglang_lines() -> None:
    lines = [
        "[2026-03-11 13:52:50] server_args=ServerArgs(model_path='/m', quantization=None, context_length=None)",
        "[2026-03-11 13:53:21 TP0] Load weight end. elapsed=23.18 s, type=Glm4MoeLiteForCausalLM, avail mem=32.02 GB, mem usage=28.79 GB.",
        "[2026-03-11 13:53:23 TP0] KV Cache is allocated. #tokens: 383872, KV size: 19.36 GB",
        "[2026-03-11 13:53:24 TP0] max_total_num_tokens=383872, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=48, context_len=202752",
        "[2026-03-11 13:53:33] The server is fired up and ready to roll!",
    ]
    facts = parse_sglang_log(lines)
    assert (facts.weights_gib, facts.load_seconds, facts.kv_cache_tokens) == (28.79, 23.18, 383872)
    assert facts.max_concurrency == 48 and facts.max_concurrency_tokens_per_request == 202752
    assert facts.quantization is None
    older = "[TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=75.11 GB, mem usage=107.07 GB."
    facts = parse_sglang_log([older])
    assert facts.weights_gib == 107.07 and facts.load_seconds is None


def test_any_log_is_read_in_the_dialect_that_finds_the_most() -> None:
    assert parse_startup_log("\n".join(CPU_LINES)).source == "vllm log"
    sglang = "[TP0] KV Cache is allocated. #tokens: 524288, KV size: 17.16 GB\nmax_total_num_tokens=524288, max_running_requests=8"
    assert parse_startup_log(sglang, origin="docker logs s").source == "sglang log (docker logs s)"
    llama = "0.00.750.511 I load_tensors:   CPU_Mapped model buffer size =   513.13 MiB\n0.00.756.862 I llama_context: n_ctx                 = 32768"
    assert parse_startup_log(llama).source == "llama.cpp log"
    unknown = parse_startup_log("hello\nworld", origin="--server-log x.log")
    assert unknown.weights_gib is None and "no start-up lines" in unknown.source


def test_llamacpp_log_of_two_startups_reports_the_second() -> None:
    first = [
        "0.00.007.618 I srv          init: loading model",
        "0.00.750.511 I load_tensors:   CPU_Mapped model buffer size =   513.13 MiB",
        "0.01.007.618 I srv          init: model loaded",
    ]
    second = [
        "0.00.001.000 I srv          init: loading model",
        "0.00.300.000 I load_tensors:   CPU_Mapped model buffer size =    92.10 MiB",
        "0.00.501.000 I srv          init: model loaded",
    ]
    facts = parse_llamacpp_log([*first, *second])
    assert facts.startups_in_log == 2
    assert facts.weights_gib == round(92.10 / 1024, 4)  # not the sum of both start-ups
    assert facts.load_seconds == 0.5
