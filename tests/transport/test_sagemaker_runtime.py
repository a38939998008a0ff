"""The SageMaker runtime client: real boto3 parsing real model output over the runtime protocol.

The loopback server speaks `POST /endpoints/NAME/invocations` and `/invocations-response-stream`
(AWS event-stream framing, chunked) and forwards to the embedded llama.cpp engine, cutting its
bytes into PayloadParts of 1, 3, 7, 19 and up to 400 bytes, so SSE lines are split and coalesced.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from sagemeter import sagemaker as sm
from sagemeter.errors import UserError
from sagemeter.request_record import LiveRecord
from sagemeter.sagemaker.invoke import open_sagemaker_client
from sagemeter.targets import SageMakerTarget
from sagemeter.transport.chat import ChatRequest
from sagemeter.transport.events import take_event
from sagemeter.transport.retry import NO_RETRIES
from sagemeter.transport.sagemaker import SageMakerRuntimeClient
from sagemeter.transport.sse import SseSplitter

if TYPE_CHECKING:
    from tests.sagemaker_fakes import RuntimeFake, World


TARGET = SageMakerTarget("gemma-4-e2b", "us-east-2")
PROMPT = "Count from one to twenty in words."


def _request(stream: bool, max_tokens: int = 24, ignore_eos: bool = True) -> ChatRequest:
    return ChatRequest(prompt=PROMPT, max_tokens=max_tokens, stream=stream, ignore_eos=ignore_eos)


def _client(name: str = "gemma-4-e2b", concurrency: int = 4) -> SageMakerRuntimeClient:
    return open_sagemaker_client(
        SageMakerTarget(name, "us-east-2"), concurrency, model="smollm2-q4_1", retry=NO_RETRIES
    )


async def test_plain_and_streamed_replies_agree_through_split_parts(runtime: RuntimeFake) -> None:
    async with _client() as client:
        plain = await client.chat(_request(stream=False))
        streamed = await client.chat(_request(stream=True))
    assert plain.ok and streamed.ok, (plain.error, streamed.error)
    assert plain.text and streamed.text == plain.text  # temperature 0, seed 0: the same reply
    assert plain.usage_tokens == streamed.usage_tokens == 24
    assert streamed.tokens_source == "usage" and streamed.honoured_length
    assert len(streamed.arrivals_us) == 24  # one token event per token, split parts or not
    assert streamed.arrivals_us == sorted(streamed.arrivals_us)
    assert streamed.first_token_s is not None and 0 < streamed.first_token_s <= streamed.total_s
    assert len(runtime.connections) == 1  # one kept-alive connection served both calls
    [first, second] = runtime.requests
    assert first["op"] == "invocations" and second["op"] == "invocations-response-stream"
    assert first["region"] == "us-east-2" and first["service"] == "sagemaker"
    assert second["content_type"] == "application/json"
    assert second["body"]["stream"] is True and second["body"]["stream_options"] == {
        "include_usage": True
    }
    assert second["body"]["model"] == "smollm2-q4_1" and second["body"]["ignore_eos"] is True


@pytest.mark.slow
async def test_sixteen_at_once_share_one_pool(runtime: RuntimeFake) -> None:
    async with _client(concurrency=16) as client:
        run = await client.batch([_request(stream=True, max_tokens=4) for _ in range(16)])
    records = run.records
    assert all(r.ok for r in records), [r.error for r in records if not r.ok]
    assert [r.stream for r in records] == list(range(16)) and run.client_cpu_s > 0
    assert len(runtime.requests) == 16
    # Sixteen at once need more than one connection, and the pool never opens more than 16.
    assert len(runtime.connections) in range(2, 17)  # pooled: more than one, at most 16


@pytest.mark.parametrize("behaviour", ["jsonlines", "tgi-lines"])
async def test_lmi_plain_json_lines_are_read_too(runtime: RuntimeFake, behaviour: str) -> None:
    runtime.behaviour["gemma-4-e2b"] = behaviour
    runtime.part_sizes = [5, 11, 400]
    async with _client() as client:
        record = await client.chat(_request(stream=True, max_tokens=12))
    assert record.ok, record.error
    assert record.text and len(record.arrivals_us) >= 3
    assert record.tokens == 12
    assert record.finish_reason == "length"


@pytest.mark.parametrize(
    ("behaviour", "expected"),
    [
        (
            "model-stream-error",
            "stream error: ModelStreamError: ModelStreamError injected after 12 parts",
        ),
        (
            "internal-stream-failure",
            "stream error: InternalStreamFailure: InternalStreamFailure injected",
        ),
    ],
)
async def test_stream_error_events_become_failed_records(
    runtime: RuntimeFake, behaviour: str, expected: str
) -> None:
    runtime.behaviour["gemma-4-e2b"] = behaviour
    async with _client() as client:
        record = await client.chat(_request(stream=True, max_tokens=64))
        after = await client.chat(_request(stream=True, max_tokens=4))  # the pool still works
    assert not record.ok and record.error is not None and record.error.startswith(expected)
    assert record.total_s > 0 and record.retries == 0
    assert not after.ok  # same endpoint, same behaviour: fails again, cleanly


async def test_model_error_and_missing_endpoint_are_failed_records(runtime: RuntimeFake) -> None:
    runtime.behaviour["broken"] = "model-error"
    runtime.behaviour["gone"] = "not-found"
    async with _client("broken") as broken, _client("gone") as gone:
        plain = await broken.chat(_request(stream=False))
        streamed = await broken.chat(_request(stream=True))
        missing = await gone.chat(_request(stream=False))
    assert not plain.ok and (plain.error or "").startswith("ModelError")
    assert "Received client error (400)" in (plain.error or "")
    assert not streamed.ok and (streamed.error or "").startswith("ModelError")
    assert not missing.ok and (missing.error or "").startswith("ValidationError: Endpoint gone")


async def test_unreachable_runtime_is_a_failed_record_not_an_exception(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", "http://127.0.0.1:9")
    async with _client() as client:
        record = await client.chat(_request(stream=True))
    assert not record.ok and (record.error or "").startswith("connection: EndpointConnectionError")


async def test_the_served_model_name_comes_from_the_deployment(
    runtime: RuntimeFake, world: World
) -> None:
    spec = sm.make_spec(
        name="gemma-4-e2b", model_id="google/gemma-4-E2B-it", region="us-east-2", role_arn=world.role,
        env={"SM_VLLM_SERVED_MODEL_NAME": "gemma"},
    )  # fmt: skip
    sm.deploy(spec, poll_s=0.02)
    async with open_sagemaker_client(TARGET, 2) as client:
        described = await client.describe()
        record = await client.chat(_request(stream=False, max_tokens=4))
    assert record.ok
    assert runtime.requests[-1]["body"]["model"] == "gemma"
    assert described["model"] == "gemma" and described["model_id"] == "google/gemma-4-E2B-it"
    assert described["engine_version"] == "0.30.0"  # the newest pinned image, as the article's
    assert described["image_digest"].startswith(
        "763104351884.dkr.ecr.us-east-2.amazonaws.com/vllm@sha256:"
    )
    assert (described["max_model_len"], described["gpu_memory_utilization"]) == (8192, 0.9)
    assert described["create_to_inservice_minutes"] is not None
    assert "HF_TOKEN" not in str(described)
    record = sm.invoke("gemma-4-e2b", "us-east-2", "Say hi.", max_tokens=4, stream=True)
    assert record.ok and record.usage_tokens is not None and 1 <= record.usage_tokens <= 4


def test_no_credentials_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(UserError, match="no AWS credentials found"):
        open_sagemaker_client(TARGET, 4)


def test_events_are_reassembled_across_parts_including_split_utf8() -> None:
    data = 'data: {"choices":[{"delta":{"content":"né"}}]}\n\ndata: [DONE]\n\n'.encode()
    cut = data.index("é".encode()) + 1  # inside the two-byte character
    splitter = SseSplitter()
    record = LiveRecord(0, 0)
    record.pieces = []
    for part in (data[:cut], data[cut : cut + 3], data[cut + 3 :]):
        for event in splitter.feed(part):
            take_event(record, event, 0.1)
    assert record.pieces == ["né"] and record.done and record.error is None


def test_a_server_error_line_is_named() -> None:
    record = LiveRecord(0, 0)
    take_event(record, json.dumps({"error": {"message": "out of memory"}}).encode(), 0.1)
    assert record.error == "out of memory"


async def test_throttling_is_sent_again_and_kept_on_the_record(runtime: RuntimeFake) -> None:
    runtime.behaviour["gemma-4-e2b"] = "throttle-once"
    async with open_sagemaker_client(TARGET, 2, model="smollm2-q4_1") as client:
        record = await client.chat(_request(stream=True, max_tokens=4))
    assert record.ok, record.error
    assert record.retries == 1 and "ThrottlingException" in record.attempts[0].error
