"""The SageMaker tools through the SDK's in-process client: real boto3 against moto's server and
the loopback AWS fakes (tests/sagemaker_fakes.py), including every refusal.

"Driven" names what a test made moto do where it lags AWS (an endpoint that stays Creating).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import anyio
import boto3
import pytest
from mcp import Client
from mcp.types import CallToolResult

from sagemeter import sagemaker as sm
from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.mcp import ServerConfig, build_server
from sagemeter.sagemaker.ledger import Ledger
from tests.mcp_helpers import Progress, error_line, ok, text_of
from tests.sagemaker_fakes import RuntimeFake, plain_endpoint

if TYPE_CHECKING:
    from pathlib import Path

    from tests.sagemaker_fakes import World


@pytest.fixture(scope="module")
def runtime_fake() -> Iterator[RuntimeFake]:
    """The loopback runtime in front of a known-truth server rather than the embedded engine:
    these tests are about what the tools send to SageMaker and answer, and the truth server
    answers in milliseconds (the real engine behind the runtime is tested in
    test_sagemaker_measure.py)."""
    with running_truth_server(TruthTiming(ttft_s=0.02, itl_s=0.004, prefill_s=50e-6)) as url:
        fake = RuntimeFake(url + "/v1")
        yield fake
        fake.close()


TOKEN = "hf_MCPTOKENMCPTOKENMCPTOKEN42"
API_KEY = "sk-container-secret-0042"
POLL = 0.02
DEPLOY = {"name": "gemma-4-e2b", "model_id": "google/gemma-4-E2B-it", "region": "us-east-2"}


def server(tmp_path: Path, **permissions: bool) -> Client:
    config = ServerConfig(results_dir=tmp_path / "results", poll_s=POLL, **permissions)
    return Client(build_server(config))


def everything(*results: CallToolResult) -> str:
    """All a client was shown: texts and structured content."""
    return "\n".join(text_of(r) + json.dumps(r.structured_content) for r in results)


async def test_without_permissions_every_change_and_log_read_is_refused(
    world: World, tmp_path: Path
) -> None:
    sm.deploy(sm.make_spec(**DEPLOY | {"role_arn": world.role}), poll_s=POLL)
    calls = len(world.moto.calls)
    async with server(tmp_path) as client:
        deploy = await client.call_tool("deploy_endpoint", DEPLOY | {"name": "another"})
        assert "started without --allow-write" in error_line(deploy)
        assert "`sagemeter mcp --allow-write`" in error_line(deploy)
        delete = await client.call_tool(
            "delete_endpoint", {"endpoint": "gemma-4-e2b@us-east-2", "confirm": "gemma-4-e2b"}
        )
        assert "--allow-write" in error_line(delete)
        logs = await client.call_tool("endpoint_logs", {"endpoint": "gemma-4-e2b@us-east-2"})
        assert "started without --allow-logs" in error_line(logs)
        # What looks still works, and nothing was created or deleted.
        status = ok(await client.call_tool("endpoint_status", {"endpoint": "gemma-4-e2b"}))
        assert status["status"] == "InService" and status["ours"]
    assert len(world.moto.calls) == calls
    assert "gemma-4-e2b" in world.moto.backend("us-east-2").endpoints


async def test_a_dry_run_needs_no_permission_and_masks_the_token(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    async with server(tmp_path) as client:
        result = await client.call_tool(
            "deploy_endpoint", DEPLOY | {"dry_run": True, "env": {"API_KEY": API_KEY}}
        )
    [plan] = ok(result)["plans"]
    environment = plan["requests"]["CreateModel"]["PrimaryContainer"]["Environment"]
    assert environment["HF_TOKEN"] == "***" and environment["API_KEY"] == "***"
    assert TOKEN not in everything(result) and API_KEY not in everything(result)
    assert world.moto.calls == []


@pytest.mark.slow
async def test_quota_price_deploy_list_status_invoke_delete(
    runtime: RuntimeFake, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    world.quotas.applied["us-east-2"] = [world.quota_item("ml.g6.xlarge for endpoint usage", 1)]
    world.prices.append(
        world.price_item("ml.g6.xlarge", "us-east-2", "USE2-Host:ml.g6.xlarge", "Hosting", "1.1267")
    )
    shown: list[CallToolResult] = []
    async with server(tmp_path, allow_write=True) as client:

        async def call(tool: str, arguments: dict[str, Any], **options: Any) -> CallToolResult:
            result = await client.call_tool(tool, arguments, **options)
            shown.append(result)
            return result

        quota = ok(
            await call("check_quota", {"instance_type": "ml.g6.xlarge", "regions": ["us-east-2"]})
        )
        assert quota["rows"][0]["quota"] == 1 and quota["rows"][0]["free"] == 1
        price = ok(await call("get_price", {"instance_type": "ml.g6.xlarge"}))
        assert price["usd_per_hour"] == 1.1267 and price["region"] == "us-east-2"

        progress = Progress()
        deployed = await call(
            "deploy_endpoint", DEPLOY | {"env": {"API_KEY": API_KEY}}, progress_callback=progress
        )
        result = ok(deployed)["result"]
        assert result["status"] == "InService" and result["hourly_usd"] == 1.1267
        assert "gemma-4-e2b@us-east-2 InService after" in text_of(deployed)
        assert "confirm=gemma-4-e2b" in text_of(deployed)
        messages = [message or "" for _, _, message in progress.seen]
        assert any("creating model" in m for m in messages)
        assert [value for value, _, _ in progress.seen] == list(range(1, len(progress.seen) + 1))
        [model] = world.moto.requests("create_model")
        assert model["primary_container"]["Environment"]["HF_TOKEN"] == TOKEN  # to AWS only

        listed = await call("list_endpoints", {"regions": ["us-east-2"]})
        [info] = ok(listed)["endpoints"]
        assert info["name"] == "gemma-4-e2b" and info["status"] == "InService"
        assert "1 may be billing" in text_of(listed)
        status = ok(await call("endpoint_status", {"endpoint": "gemma-4-e2b"}))
        assert status["instance_types"] == ["ml.g6.xlarge"] and status["instance_count"] == 1

        reply = await call(
            "invoke_endpoint",
            {"endpoint": "gemma-4-e2b@us-east-2", "prompt": "Say hi.", "max_tokens": 6},
        )
        answer = ok(reply)
        assert answer["text"] and answer["completion_tokens"] is not None
        assert runtime.requests[-1]["name"] == "gemma-4-e2b"

        wrong = await call(
            "delete_endpoint", {"endpoint": "gemma-4-e2b@us-east-2", "confirm": "yes"}
        )
        assert "confirm must be the endpoint's name 'gemma-4-e2b'" in error_line(wrong)
        assert "gemma-4-e2b" in world.moto.backend("us-east-2").endpoints

        deleted = await call(
            "delete_endpoint", {"endpoint": "gemma-4-e2b@us-east-2", "confirm": "gemma-4-e2b"}
        )
        steps = ok(deleted)["steps"]
        assert [(s["kind"], s["outcome"]) for s in steps] == [
            ("endpoint", "deleted"),
            ("endpoint-config", "deleted"),
            ("model", "deleted"),
        ]
        lines = text_of(deleted).splitlines()
        assert [line.split(" (")[0] for line in lines[1:]] == [
            "endpoint: deleted",
            "endpoint-config: deleted",
            "model: deleted",
        ]
        empty = await call("list_endpoints", {"regions": ["us-east-2"]})
        assert ok(empty)["endpoints"] == []
        assert text_of(empty) == "no sagemeter endpoints in us-east-2"
    assert TOKEN not in everything(*shown) and API_KEY not in everything(*shown)


async def test_a_cancelled_deploy_leaves_a_record_list_endpoints_shows(
    world: World, tmp_path: Path
) -> None:
    """Driven: new endpoints stay Creating, so the deploy waits until the call is cancelled."""
    world.moto.initial_status = "Creating"
    progress = Progress()
    async with server(tmp_path, allow_write=True) as client:
        async with anyio.create_task_group() as group:

            async def cancel_while_creating(
                value: float, total: float | None, message: str | None
            ) -> None:
                await progress(value, total, message)
                if "creating Creating" in (message or ""):
                    group.cancel_scope.cancel()

            async def deploy() -> None:
                await client.call_tool(
                    "deploy_endpoint", DEPLOY, progress_callback=cancel_while_creating
                )
                raise AssertionError("the deploy was not cancelled")

            group.start_soon(deploy)
        listed = ok(await client.call_tool("list_endpoints", {"regions": ["us-east-2"]}))
    [info] = listed["endpoints"]
    assert info["name"] == "gemma-4-e2b" and info["status"] == "Creating"
    assert (
        info["note"]
        == "interrupted while waiting for InService: the endpoint may still be creating"
    )
    record = Ledger().get("us-east-2", "gemma-4-e2b")
    assert record is not None and record.active


async def test_delete_touches_only_what_sagemeter_tagged(world: World, tmp_path: Path) -> None:
    plain_endpoint("not-ours", "us-east-2", "ml.m5.large")
    async with server(tmp_path, allow_write=True) as client:
        refused = await client.call_tool(
            "delete_endpoint", {"endpoint": "not-ours@us-east-2", "confirm": "not-ours"}
        )
        assert "is not tagged as sagemeter's: not touching it" in error_line(refused)
        nothing = await client.call_tool(
            "delete_endpoint", {"endpoint": "never-made@us-east-2", "confirm": "never-made"}
        )
        assert "nothing to delete" in error_line(nothing)
    assert "not-ours" in world.moto.backend("us-east-2").endpoints


async def test_logs_need_the_flag_and_are_masked_and_kept_out_of_progress(
    world: World, tmp_path: Path
) -> None:
    group = "/aws/sagemaker/Endpoints/gemma-4-e2b"
    logs = boto3.client("logs", region_name="us-east-2")
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="AllTraffic/i-0")
    now = int(time.time() * 1000)
    lines = ["INFO vLLM starting", f"INFO token {TOKEN} loaded", "INFO Uvicorn running"]
    logs.put_log_events(
        logGroupName=group,
        logStreamName="AllTraffic/i-0",
        logEvents=[{"timestamp": now + i, "message": line} for i, line in enumerate(lines)],
    )
    async with server(tmp_path, allow_logs=True) as client:
        read = await client.call_tool(
            "endpoint_logs", {"endpoint": "gemma-4-e2b@us-east-2", "lines": 2}
        )
        result = ok(read)
        assert [line["message"] for line in result["lines"]] == [
            "INFO token *** loaded",
            "INFO Uvicorn running",
        ]
        assert TOKEN not in everything(read)
        missing = ok(await client.call_tool("endpoint_logs", {"endpoint": "other@us-east-2"}))
        assert missing["exists"] is False
    # With --allow-write but not --allow-logs, deploy progress carries no log lines.
    world.moto.initial_status = "Creating"
    progress = Progress()

    async def make_in_service(value: float, total: float | None, message: str | None) -> None:
        await progress(value, total, message)
        if "creating Creating" in (message or ""):
            world.moto.set_status("us-east-2", "gemma-4-e2b", "InService")

    async with server(tmp_path, allow_write=True) as client:
        deployed = await client.call_tool(
            "deploy_endpoint", DEPLOY, progress_callback=make_in_service
        )
    assert ok(deployed)["result"]["status"] == "InService"
    assert any("creating Creating" in (m or "") for _, _, m in progress.seen)
    assert not any("Uvicorn" in (m or "") for _, _, m in progress.seen)


async def test_aws_problems_are_one_actionable_sentence(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with server(tmp_path, allow_write=True) as client:
        unknown = await client.call_tool("endpoint_status", {"endpoint": "nope@us-east-2"})
        assert "no endpoint nope in us-east-2" in error_line(unknown)
        bad_name = await client.call_tool("deploy_endpoint", DEPLOY | {"name": "bad-"})
        assert "not a valid endpoint name" in error_line(bad_name)
        monkeypatch.delenv("SAGEMETER_ROLE_ARN")
        no_role = await client.call_tool("deploy_endpoint", DEPLOY)
        assert "pass role_arn or set SAGEMETER_ROLE_ARN" in error_line(no_role)
        monkeypatch.delenv("AWS_ACCESS_KEY_ID")
        monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
        for tool, arguments in [
            ("list_endpoints", {}),
            ("check_quota", {"instance_type": "ml.g6.xlarge"}),
            ("get_price", {"instance_type": "ml.g6.xlarge"}),
        ]:
            answer = await client.call_tool(tool, arguments)
            assert "no AWS credentials found: run `aws configure`" in error_line(answer)


async def test_a_fallback_deploy_names_where_it_landed_and_tools_find_it_by_name(
    world: World, tmp_path: Path
) -> None:
    """us-east-2 refuses CreateEndpoint for quota; the endpoint lands in us-east-1. The answer
    reports the cleaned-up attempt and the image; NAME alone finds the endpoint; NAME@us-east-2
    is one sentence naming where it is."""
    world.moto.create_endpoint_errors["us-east-2"] = ("ResourceLimitExceeded", "limit is 1")
    async with server(tmp_path, allow_write=True) as client:
        deployed = await client.call_tool(
            "deploy_endpoint", DEPLOY | {"fallback_regions": ["us-east-1"]}
        )
        result = ok(deployed)["result"]
        assert result["region"] == "us-east-1" and result["status"] == "InService"
        text = text_of(deployed)
        assert "us-east-2: capacity: ResourceLimitExceeded" in text
        assert "gemma-4-e2b in us-east-2:\nendpoint: not found" in text  # the cleanup, step by step
        assert "model: deleted" in text
        assert "image 763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.30.0-" in text
        assert "gemma-4-e2b@us-east-1 InService after" in text

        status = ok(await client.call_tool("endpoint_status", {"endpoint": "gemma-4-e2b"}))
        assert status["region"] == "us-east-1"
        wrong = await client.call_tool("endpoint_status", {"endpoint": "gemma-4-e2b@us-east-2"})
        assert "sagemeter placed gemma-4-e2b in us-east-1" in error_line(wrong)

        everything = await client.call_tool(
            "list_endpoints", {"regions": ["us-east-1"], "all_endpoints": True}
        )
        [info] = ok(everything)["endpoints"]
        assert info["ours"] and info["name"] == "gemma-4-e2b"


async def test_a_dry_run_shows_the_image_the_registry_offers_and_the_article_settings(
    world: World, tmp_path: Path
) -> None:
    async with server(tmp_path) as client:
        result = await client.call_tool("deploy_endpoint", DEPLOY | {"dry_run": True})
    [plan] = ok(result)["plans"]
    assert plan["image_source"] == "registry"
    assert plan["image"].endswith("/vllm:0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.1")
    environment = plan["requests"]["CreateModel"]["PrimaryContainer"]["Environment"]
    assert environment["SM_VLLM_MAX_MODEL_LEN"] == "8192"
    assert environment["SM_VLLM_GPU_MEMORY_UTILIZATION"] == "0.9"
    assert world.moto.calls == []


@pytest.mark.slow
async def test_measure_endpoint_finds_a_bare_name_in_the_configured_region(
    runtime: RuntimeFake, world: World, tmp_path: Path
) -> None:
    """The one region rule in the MCP face too: an endpoint this machine never deployed, named
    alone, is measured in AWS_REGION's region (us-east-2) and the result says which rule chose it."""
    plain_endpoint("someone-elses", "us-east-2", "ml.m5.large")
    runtime.placed["someone-elses"] = "us-east-2"  # any other region's runtime: not found
    async with server(tmp_path) as client:
        answer = ok(
            await client.call_tool(
                "measure_endpoint",
                {"target": "someone-elses", "name": "theirs", "quick": True, "metrics_wait_s": 1},
            )
        )
    assert answer["target"] == "someone-elses@us-east-2" and answer["failed_requests"] == 0
    written = json.loads((tmp_path / "results" / "measure-theirs.json").read_text())
    server_facts = written["detail"]["environment"]["server"]
    assert (server_facts["region"], server_facts["region_source"]) == ("us-east-2", "AWS_REGION")
    assert {request["region"] for request in runtime.requests} == {"us-east-2"}
    # CloudWatch (moto's, empty) was read for the endpoint's variant, waiting the 1 s asked.
    metrics = written["detail"]["endpoint_metrics"]
    assert (metrics["variant"], metrics["wait_s"]) == ("v", 1.0) and metrics["reads"] >= 2
    assert "did not arrive within 1 s" in metrics["phases"][0]["missing"]["model_latency_ms"]
    assert any("did not arrive within 1 s" in warning for warning in answer["warnings"])
