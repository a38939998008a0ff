"""`measure NAME@REGION` end to end: deploy on moto, measure through the runtime wire fake
(which forwards to the real embedded engine), start-up facts from the endpoint's CloudWatch log."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
import pytest

from sagemeter import sagemaker as sm
from sagemeter.measure.workflow import measure_target
from sagemeter.results import load_result
from sagemeter.settings import quick_settings
from sagemeter.targets import parse_target
from tests.sagemaker_fakes import RuntimeFake, World, plain_endpoint

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


@pytest.mark.slow
def test_measure_a_sagemaker_endpoint_writes_a_full_result(
    world: World, runtime: RuntimeFake, tmp_path: Path
) -> None:
    spec = sm.make_spec(
        name="gemma-4-e2b",
        model_id="google/gemma-4-E2B-it",
        region="us-east-2",
        role_arn=world.role,
    )
    world.prices.append(
        world.price_item("ml.g6.xlarge", "us-east-2", "USE2-Host:ml.g6.xlarge", "Hosting", "1.1267")
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
    # Every result names what ran: the pinned image and its digest, the placed instance type and
    # its price.
    assert env.server["image"].endswith("/vllm:0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.1")
    assert env.server["image_digest"].startswith(
        "763104351884.dkr.ecr.us-east-2.amazonaws.com/vllm@sha256:"
    )
    assert env.server["instance_types"] == ["ml.g6.xlarge"]
    assert (env.server["hourly_usd"], env.server["priced_instance_type"]) == (
        1.1267,
        "ml.g6.xlarge",
    )
    _combine_prices_from_the_results(path, tmp_path)
    operations = {request["op"] for request in runtime.requests}
    assert operations == {"invocations", "invocations-response-stream"}


def _combine_prices_from_the_results(path: Path, tmp_path: Path) -> None:
    """combine without --price-per-hour: the price both results recorded at deploy; and when
    one recorded none, no cost rows and the reason why."""
    from sagemeter.compare import combine

    again = tmp_path / "measure-gemma-4-e2b-again.json"
    again.write_text(path.read_text())
    priced = combine([path, again])
    assert priced.price_per_hour == 1.1267
    assert any(row.key.startswith("usd_per_million_tokens_c") for row in priced.rows)
    assert any("recorded at deploy for ml.g6.xlarge" in w for w in priced.warnings)

    data = json.loads(path.read_text())
    server = data["detail"]["environment"]["server"]
    del server["hourly_usd"]
    server["price_note"] = "AWS denied pricing:GetProducts in us-east-2"
    again.write_text(json.dumps(data))
    unpriced = combine([path, again])
    assert unpriced.price_per_hour is None
    assert not any(row.key.startswith("usd_per_million") for row in unpriced.rows)
    assert any(
        w.startswith("no cost rows: pass --price-per-hour")
        and "AWS denied pricing:GetProducts" in w
        for w in unpriced.warnings
    )


def test_a_bare_name_finds_where_it_was_placed_and_a_wrong_region_says_where(
    world: World, runtime: RuntimeFake, tmp_path: Path
) -> None:
    from sagemeter.errors import UserError
    from sagemeter.targets import SageMakerTarget

    spec = sm.make_spec(
        name="gemma-4-e2b",
        model_id="google/gemma-4-E2B-it",
        region="us-east-2",
        role_arn=world.role,
    )
    sm.deploy(spec, poll_s=0.02)
    runtime.placed["gemma-4-e2b"] = "us-east-2"  # any other region's runtime: not found
    assert parse_target("gemma-4-e2b") == SageMakerTarget("gemma-4-e2b", "us-east-2")
    with pytest.raises(UserError, match="placed gemma-4-e2b in us-east-2") as caught:
        asyncio.run(
            measure_target(
                parse_target("gemma-4-e2b@us-west-2"),
                name="wrong",
                settings=quick_settings(),
                out_dir=tmp_path,
            )
        )
    assert "does not answer as a chat API" in str(caught.value)
    assert not list(tmp_path.glob("measure-*.json"))


@pytest.mark.slow
def test_a_bare_name_not_deployed_here_is_in_the_configured_region_and_says_so(
    world: World, runtime: RuntimeFake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one region rule for a measure target: no record here, so AWS_REGION (us-east-2; the
    profile says us-west-2), then the profile's region, and with neither one clear line."""
    from sagemeter.errors import UserError
    from sagemeter.targets import SageMakerTarget

    plain_endpoint("someone-elses", "us-east-2")
    runtime.placed["someone-elses"] = "us-east-2"  # any other region's runtime: not found
    target = parse_target("someone-elses")
    assert target == SageMakerTarget("someone-elses", "us-east-2")
    assert isinstance(target, SageMakerTarget) and target.region_source == "AWS_REGION"
    result, path = asyncio.run(
        measure_target(target, name="someone-elses", settings=quick_settings(), out_dir=tmp_path)
    )
    assert result.decode_tokens_per_second is not None
    assert result.detail is not None
    env = load_result(path).detail.environment  # type: ignore[union-attr]
    assert env.target == "someone-elses@us-east-2"
    assert (env.server["region"], env.server["region_source"]) == ("us-east-2", "AWS_REGION")
    assert {request["region"] for request in runtime.requests} == {"us-east-2"}

    monkeypatch.delenv("AWS_REGION")
    profile = parse_target("someone-elses")
    assert isinstance(profile, SageMakerTarget)
    assert (profile.region, profile.region_source) == ("us-west-2", "profile default")

    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    with pytest.raises(UserError, match="no AWS region is configured; write someone-elses@REGION"):
        parse_target("someone-elses")
