"""Connections the SageMaker runtime drops, on the wire: real boto3 against the loopback runtime.

A network or a crashed container drops a connection either before any byte of the answer (the
endpoint never took the request: sent again, as the HTTP wire does) or after the answer began
(status line and headers, maybe some event-stream parts: a failed record, not sent again). botocore
reads the event stream straight from urllib3, so the cut raises urllib3's own exception; either
way the client records one failed request with a one-line reason, never a traceback.

The runtime fake stands in front of the known-truth server here (it answers in milliseconds);
the last test has the truth server close every kept-alive connection that is used again, as
llama.cpp closes idle ones, and the fake must send the lost request again, never cut the reply.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.faults import Faults
from sagemeter.sagemaker.invoke import open_sagemaker_client
from sagemeter.targets import SageMakerTarget
from sagemeter.transport.chat import ChatRequest
from sagemeter.transport.retry import RetryPolicy
from sagemeter.transport.sagemaker import SageMakerRuntimeClient
from tests.sagemaker_fakes import RuntimeFake, World
from tests.truth_stats import truth_stats

TRUTH = TruthTiming(ttft_s=0.01, itl_s=0.002)
NAME = "cut-endpoint"
# Room to send again, at once: a request that is sent again shows as `retries` on its record.
RETRY = RetryPolicy(retries=2, base_s=0.001, max_s=0.001)


@pytest.fixture(scope="module")
def runtime_fake() -> Iterator[RuntimeFake]:
    """The runtime in front of the truth server (replaces the session's engine-backed one)."""
    with running_truth_server(TRUTH) as url:
        fake = RuntimeFake(url + "/v1")
        yield fake
        fake.close()


def _client(retry: RetryPolicy = RETRY) -> SageMakerRuntimeClient:
    return open_sagemaker_client(SageMakerTarget(NAME, "us-east-2"), 2, model="m", retry=retry)


def _request(stream: bool) -> ChatRequest:
    return ChatRequest(prompt="Count to forty.", max_tokens=40, stream=stream, ignore_eos=True)


@pytest.mark.parametrize(
    ("stream", "parts"),
    [(True, 6), (True, 0), (False, 0)],
    ids=["stream-after-6-parts", "stream-after-headers", "whole-body-half-sent"],
)
async def test_a_reply_cut_after_it_began_is_one_failed_record_never_sent_again(
    runtime: RuntimeFake, stream: bool, parts: int
) -> None:
    runtime.behaviour[NAME] = "cut-mid-reply"
    runtime.cut_after_parts = parts
    async with _client() as client:
        cut = await client.chat(_request(stream))
        runtime.behaviour[NAME] = "engine"
        after = await client.chat(_request(stream))  # the pool still serves the endpoint
    error = cut.error or ""
    assert not cut.ok and error.startswith("connection lost mid-reply: "), error
    # botocore wraps a whole body's cut (ResponseStreamingError), not an event stream's: either
    # way the reason names urllib3's ProtocolError, on one line.
    assert "ProtocolError: " in error and "\n" not in error and len(error) < 240, error
    assert cut.retries == 0 and not cut.attempts  # the answer had begun: never sent again
    assert cut.usage_tokens is None and cut.finish_reason is None  # nothing of the cut reply
    assert after.ok and after.usage_tokens == 40, after.error
    assert [r["op"] for r in runtime.requests] == [cut_op(stream)] * 2  # one send, one after


def cut_op(stream: bool) -> str:
    return "invocations-response-stream" if stream else "invocations"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_a_close_before_any_answer_is_sent_again_and_then_served(
    runtime: RuntimeFake, stream: bool
) -> None:
    runtime.behaviour[NAME] = "close-before-answer-once"
    async with _client() as client:
        record = await client.chat(_request(stream))
    assert record.ok and record.usage_tokens == 40, record.error
    [lost] = record.attempts
    assert lost.error.startswith("connection lost before any answer: ProtocolError: "), lost.error
    assert "\n" not in lost.error and lost.status is None
    assert record.retries == 1 and len(runtime.requests) == 2


async def test_a_close_before_any_answer_without_retries_left_is_a_failed_record(
    runtime: RuntimeFake,
) -> None:
    runtime.behaviour[NAME] = "close-before-answer-once"
    async with _client(RetryPolicy(retries=0)) as client:
        record = await client.chat(_request(stream=True))
    assert not record.ok and record.retries == 0
    assert (record.error or "").startswith("connection lost before any answer: ")


async def test_a_stream_silent_past_the_read_timeout_is_a_timeout_record(
    runtime: RuntimeFake,
) -> None:
    """urllib3 raises its own ReadTimeoutError from inside the event stream (botocore's is only
    for a silence before the status line): a timeout, recorded as one, never sent again."""
    runtime.behaviour[NAME] = "stall-mid-reply"
    runtime.cut_after_parts, runtime.stall_s = 10, 3.0
    target = SageMakerTarget(NAME, "us-east-2")
    async with open_sagemaker_client(target, 1, model="m", timeout_s=1.0, retry=RETRY) as client:
        started = time.perf_counter()
        record = await client.chat(_request(stream=True))
        waited = time.perf_counter() - started
    assert not record.ok and record.error == "timeout: ReadTimeoutError", record.error
    assert record.retries == 0 and len(runtime.requests) == 1
    assert record.arrivals_us  # the silence came after tokens: inside the event stream
    # Ended by the client's 1 s timeout, not the close at 3 s (1 s, not less: the fake's 200
    # comes only once the truth server answered, and on a busy host that wait is read against
    # the same timeout).
    assert 1.0 <= waited < 2.8


async def test_the_fake_sends_a_request_its_kept_engine_connection_lost_once_more(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request the fake sends on a kept-alive engine connection that already carried a reply
    meets a close before any answer (the truth server's `on-reuse`, the race of llama.cpp
    closing an idle one): the fake sends it again on a new connection, and every reply reaches
    the client whole. The lost connection leaves the pool, so every second request meets one."""
    with running_truth_server(TRUTH, faults=Faults(connection_close="on-reuse")) as url:
        fake = RuntimeFake(url + "/v1")
        try:
            monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", fake.url)
            async with _client(RetryPolicy(retries=0)) as client:
                records = [await client.chat(_request(stream=i % 2 == 0)) for i in range(4)]
            stats = truth_stats(url)
        finally:
            fake.close()
    assert all(r.ok and r.usage_tokens == 40 for r in records), [r.error for r in records]
    assert fake.upstream_resent == 2  # the 2nd and the 4th, each on its kept connection
    assert stats["closed_unanswered"] == 2
