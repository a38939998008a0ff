"""The server's own /metrics: parsing vLLM's and llama.cpp's pages (as those servers print them),
the per-phase comparison with the client's counts, and a server without metrics."""

from __future__ import annotations

import asyncio

import pytest

from sagemeter.measure.server_metrics.crosscheck import client_counts, compare_phase
from sagemeter.measure.server_metrics.recorder import MetricsRecorder
from sagemeter.measure.server_metrics.scrape import parse_metrics
from sagemeter.request_record import RequestRecord
from sagemeter.results.server_metrics import ClientCounts
from tests.wire import WireServer


def vllm_page(
    generation: int,
    prompt: int,
    finished: int,
    decode_s: float,
    ttft_s: float,
    prefill_s: float = 0.0,
) -> str:
    """A vLLM 0.32 /metrics page, trimmed to the families sagemeter reads."""
    return f"""# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="smollm2-f32"}} {generation}.0
vllm:generation_tokens_created{{engine="0",model_name="smollm2-f32"}} 1.7962912e+09
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{engine="0",model_name="smollm2-f32"}} {prompt}.0
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{{engine="0",finished_reason="stop",model_name="smollm2-f32"}} 0.0
vllm:request_success_total{{engine="0",finished_reason="length",model_name="smollm2-f32"}} {finished}.0
vllm:request_success_total{{engine="0",finished_reason="abort",model_name="smollm2-f32"}} 0.0
# HELP vllm:request_decode_time_seconds Histogram of time spent in DECODE phase for request.
# TYPE vllm:request_decode_time_seconds histogram
vllm:request_decode_time_seconds_bucket{{engine="0",le="0.3",model_name="smollm2-f32"}} 0.0
vllm:request_decode_time_seconds_bucket{{engine="0",le="+Inf",model_name="smollm2-f32"}} {finished}.0
vllm:request_decode_time_seconds_count{{engine="0",model_name="smollm2-f32"}} {finished}.0
vllm:request_decode_time_seconds_sum{{engine="0",model_name="smollm2-f32"}} {decode_s}
# HELP vllm:request_prefill_time_seconds Histogram of time spent in PREFILL phase for request.
# TYPE vllm:request_prefill_time_seconds histogram
vllm:request_prefill_time_seconds_bucket{{engine="0",le="+Inf",model_name="smollm2-f32"}} {finished}.0
vllm:request_prefill_time_seconds_count{{engine="0",model_name="smollm2-f32"}} {finished}.0
vllm:request_prefill_time_seconds_sum{{engine="0",model_name="smollm2-f32"}} {prefill_s}
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.1",model_name="smollm2-f32"}} {finished}.0
vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf",model_name="smollm2-f32"}} {finished}.0
vllm:time_to_first_token_seconds_count{{engine="0",model_name="smollm2-f32"}} {finished}.0
vllm:time_to_first_token_seconds_sum{{engine="0",model_name="smollm2-f32"}} {ttft_s}
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{{block_size="128",engine="0",kv_cache_max_concurrency="45.5",kv_cache_size_tokens="93184",num_gpu_blocks="728"}} 1.0
"""


LLAMACPP_PAGE = """# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total {prompt}
# HELP llamacpp:prompt_seconds_total Prompt process time
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total {prompt_seconds}
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total {predicted}
# HELP llamacpp:tokens_predicted_seconds_total Total time spent generating tokens
# TYPE llamacpp:tokens_predicted_seconds_total counter
llamacpp:tokens_predicted_seconds_total {seconds}
# HELP llamacpp:requests_processing Number of requests processing
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 0
"""


def record(tokens: int, *, ok: bool = True, usage: bool = True) -> RequestRecord:
    """A finished streamed request: first token at 50 ms, then gaps of 20 and 30 ms."""
    return RequestRecord(
        stream=0,
        index=0,
        scheduled_us=None,
        send_us=0,
        end_us=100_000,
        arrivals_us=[50_000, 70_000, 100_000] if ok else [],
        usage_tokens=tokens if ok and usage else None,
        engine_tokens=None,
        finish_reason="length" if ok else None,
        done=ok,
        error=None if ok else "HTTP 500",
        max_tokens=tokens,
    )


def test_vllm_page_is_summed_over_labels_and_recognised() -> None:
    page = parse_metrics(vllm_page(108, 370, 5, 0.46, 0.55))
    assert page.engine == "vllm"
    assert page.samples["vllm:generation_tokens_total"] == 108
    assert page.samples["vllm:request_success_total"] == 5  # stop + length + abort
    decode = page.histograms["vllm:request_decode_time_seconds"]
    assert (decode.count, decode.sum, decode.buckets[float("inf")]) == (5, 0.46, 5)
    assert page.labels["vllm:cache_config_info"]["kv_cache_size_tokens"] == "93184"
    llama = parse_metrics(
        LLAMACPP_PAGE.format(prompt=37, predicted=8, seconds=0.5, prompt_seconds=0.1)
    )
    assert llama.engine == "llama.cpp" and llama.samples["llamacpp:tokens_predicted_total"] == 8
    assert parse_metrics("# nothing here\n").engine is None


def test_phase_counts_agree_and_the_engine_rate_is_the_servers() -> None:
    before = parse_metrics(vllm_page(100, 300, 4, 1.0, 0.4))
    after = parse_metrics(vllm_page(100 + 4 * 48, 600, 8, 1.0 + 4 * 47 / 40.0, 0.8))
    client = client_counts([record(48) for _ in range(4)])
    phase = compare_phase("decode", "vllm", before, after, client)
    assert (phase.generation_tokens, phase.requests, phase.prompt_tokens) == (192, 4, 300)
    assert phase.agrees is True and phase.problems == []
    # 4 replies of 48 tokens: 47 decoded after the first, at 40 tokens/s by construction
    assert phase.engine_tokens_per_second == pytest.approx(40.0)
    ttft = phase.histograms["ttft_s"]
    assert (ttft.count, ttft.mean) == (4, pytest.approx(0.1))
    assert phase.client.ttft_mean_s == pytest.approx(0.05)


def test_counts_beyond_counting_noise_are_flagged() -> None:
    before = parse_metrics(vllm_page(0, 0, 0, 0.0, 0.0))
    off_by_three = parse_metrics(vllm_page(1003, 10, 10, 1.0, 0.1))
    client = client_counts([record(100) for _ in range(10)])
    phase = compare_phase("parallel", "vllm", before, off_by_three, client)
    assert phase.agrees is False
    assert phase.problems == [
        "parallel: the server counted 1,003 generated tokens, the client 1,000 (beyond counting noise)"
    ]
    within = parse_metrics(vllm_page(1002, 10, 10, 1.0, 0.1))  # 0.2% of 1,000: counting noise
    assert compare_phase("parallel", "vllm", before, within, client).agrees is True
    missing = parse_metrics(vllm_page(1000, 10, 9, 1.0, 0.1))
    lost = compare_phase("parallel", "vllm", before, missing, client)
    assert lost.agrees is False
    assert lost.problems == ["parallel: the server finished 9 requests, the client sent 10"]


def test_failed_requests_leave_tokens_uncompared_and_warm_up_is_counted() -> None:
    before = parse_metrics(vllm_page(0, 0, 0, 0.0, 0.0))
    after = parse_metrics(vllm_page(56, 10, 3, 1.0, 0.1))
    client = client_counts([record(48), record(48, ok=False)], unrecorded=(1, 8))
    assert (client.requests, client.failed, client.generation_tokens) == (3, 1, 56)
    phase = compare_phase("decode", "vllm", before, after, client)
    assert phase.agrees is True  # the request count still agrees
    assert phase.notes == ["decode: tokens not compared, 1 requests failed on the client"]
    events = client_counts([record(48, usage=False)])
    assert events.generation_tokens is None  # counted by events, not by the server's usage


def test_llamacpp_phase_rate_from_generation_seconds() -> None:
    before = parse_metrics(
        LLAMACPP_PAGE.format(prompt=0, predicted=10, seconds=1.0, prompt_seconds=0.0)
    )
    after = parse_metrics(
        LLAMACPP_PAGE.format(prompt=74, predicted=110, seconds=3.0, prompt_seconds=0.25)
    )
    phase = compare_phase(
        "decode",
        "llama.cpp",
        before,
        after,
        ClientCounts(requests=2, failed=0, generation_tokens=100),
    )
    assert phase.requests is None  # llama.cpp counts no requests
    assert phase.agrees is True and phase.engine_tokens_per_second == pytest.approx(50.0)
    assert phase.engine_prompt_tokens_per_second == pytest.approx(74 / 0.25)


def test_the_engines_own_prompt_rate_is_prompt_tokens_over_its_prefill_time() -> None:
    before = parse_metrics(vllm_page(0, 100, 0, 0.0, 0.0, prefill_s=0.5))
    # 4 prompts of 1,000 tokens, 2 s of prefill in all: 2,000 prompt tokens/s by construction
    after = parse_metrics(vllm_page(4, 4100, 4, 0.0, 2.1, prefill_s=2.5))
    phase = compare_phase("prefill", "vllm", before, after, client_counts([record(1)] * 4))
    assert phase.engine_prompt_tokens_per_second == pytest.approx(2000.0)
    # Tokens served from the prefix cache were counted as prompt tokens but not computed.
    cached = "vllm:prefix_cache_queries_total 0.0\nvllm:prefix_cache_hits_total {}\n"
    before = parse_metrics(vllm_page(0, 100, 0, 0.0, 0.0, prefill_s=0.5) + cached.format(0.0))
    after = parse_metrics(vllm_page(5, 5100, 5, 0.0, 2.1, prefill_s=2.5) + cached.format(1000.0))
    phase = compare_phase("prefill", "vllm", before, after, client_counts([record(1)] * 5))
    assert phase.engine_prompt_tokens_per_second == pytest.approx(2000.0)
    # No prefill time reported (an older vLLM): no rate, never a guess.
    plain = parse_metrics(vllm_page(4, 4100, 4, 0.0, 2.1).replace("request_prefill", "other"))
    phase = compare_phase("prefill", "vllm", before, plain, client_counts([record(1)] * 4))
    assert phase.engine_prompt_tokens_per_second is None


def test_a_server_without_metrics_gives_a_note_not_an_error() -> None:
    with WireServer({}) as server:
        recorder = MetricsRecorder(server.url.removesuffix("/v1"))

        async def run() -> None:
            await recorder.open()
            await recorder.begin()
            await recorder.end("decode", [record(4)])

        asyncio.run(run())
    assert recorder.engine is None and recorder.detail is not None
    assert recorder.detail.notes == ["server metrics not read: GET /metrics answered HTTP 404"]
    assert recorder.detail.phases == []
    assert recorder.warnings() == [] and recorder.startup_facts() is None
