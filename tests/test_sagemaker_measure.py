"""`measure NAME@REGION` end to end: deploy on moto, measure through the runtime wire fake
(which forwards to the real embedded engine), start-up facts from the endpoint's CloudWatch log."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3

from sagemeter.backends import sagemaker as sm
from sagemeter.results import load_result
from sagemeter.settings import quick_settings
from sagemeter.targets import parse_target
from sagemeter.workflows import measure_target
from tests.sagemaker_fakes import RuntimeFake, World

VLLM_LINES = [
    "Initializing a V1 LLM engine with config: model='google/gemma-4-E2B-it', quantization=None",
    "Model loading took 9.75 GiB memory and 82.751806 seconds",
    "GPU KV cache size: 723,484 tokens",
    "Maximum concurrency for 8,192 tokens per request: 88.32x",
]


def _container_log(name: str, lines: list[str]) -> None:
    logs = boto3.client("logs", region_name="us-east-2")
    group = f"/aws/sagemaker/Endpoints/{name}"
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="AllTraffic/i-0")
    base = int((datetime.now(UTC) + timedelta(seconds=1)).timestamp() * 1000)
    events = [{"timestamp": base + i, "message": line} for i, line in enumerate(lines)]
    logs.put_log_events(logGroupName=group, logStreamName="AllTraffic/i-0", logEvents=events)


def test_measure_a_sagemaker_endpoint_writes_a_full_result(
    world: World, runtime: RuntimeFake, tmp_path: Path
) -> None:
    spec = sm.make_spec(
        name="gemma-4-e2b",
        model_id="google/gemma-4-E2B-it",
        region="us-east-2",
        role_arn=world.role,
    )
    sm.deploy(spec, poll_s=0.02)
    _container_log("gemma-4-e2b", VLLM_LINES)

    result, path = asyncio.run(
        measure_target(
            parse_target("gemma-4-e2b@us-east-2"),
            name="gemma-4-e2b",
            settings=quick_settings(),
            out_dir=tmp_path,
        )
    )
    assert load_result(path) == result
    assert result.decode_tokens_per_second is not None and result.decode_tokens_per_second > 0
    assert set(result.load_tokens_per_second) == {"1", "4"}
    assert (result.weights_gib, result.kv_cache_tokens, result.load_seconds) == (
        9.75,
        723484,
        82.751806,
    )
    detail = result.detail
    assert detail is not None
    assert detail.failed_requests == 0
    assert detail.startup is not None and detail.startup.max_concurrency == 88.32
    env = detail.environment
    assert env.backend == "sagemaker"
    assert env.target == "gemma-4-e2b@us-east-2"
    assert env.server.get("image", "").endswith("-sagemaker")
    operations = {request["op"] for request in runtime.requests}
    assert operations == {"invocations", "invocations-response-stream"}
