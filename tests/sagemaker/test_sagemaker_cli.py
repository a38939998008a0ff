"""The SageMaker commands through typer's CliRunner (and one real subprocess for Ctrl-C).

Everything below the CLI is real: boto3 against moto's server and the loopback fakes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import typer
from typer.testing import CliRunner, Result

from sagemeter.cli.sagemaker import register
from sagemeter.sagemaker.ledger import Ledger
from tests.sagemaker_fakes import Injection

if TYPE_CHECKING:
    from tests.sagemaker_fakes import RuntimeFake, SageMakerProxy, World


TOKEN = "hf_CLITOKENCLITOKENCLI123456"
FAST = ["--poll-seconds", "0.02"]


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def run(*args: str) -> Result:
    """`sagemeter sagemaker ARGS…` (the SageMaker verbs are one group)."""
    return CliRunner(env={"COLUMNS": "200"}).invoke(_app(), ["sagemaker", *args])  # no wrapping


def _one_error_line(result: Result, code: int = 2) -> str:
    """The one `error:` line of a failed command; `code` 2 for input, 4 when AWS refused."""
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    return lines[0]


def test_dry_run_shows_the_requests_with_the_token_masked(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    result = run(
        "deploy", "gemma-4-e2b", "--model", "google/gemma-4-E2B-it", "--region", "us-east-2",
        "--fallback-instance-type", "ml.g5.xlarge", "--env", "SM_VLLM_MAX_MODEL_LEN=8192", "--dry-run",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    [plan] = json.loads(result.stdout)
    variant = plan["requests"]["CreateEndpointConfig"]["ProductionVariants"][0]
    assert [p["InstanceType"] for p in variant["InstancePools"]] == ["ml.g6.xlarge", "ml.g5.xlarge"]
    assert plan["requests"]["CreateModel"]["PrimaryContainer"]["Environment"]["HF_TOKEN"] == "***"
    assert TOKEN not in result.stdout + result.stderr
    assert world.moto.calls == []


def test_deploy_list_status_delete_round_trip(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    world.prices.append(
        world.price_item("ml.g6.xlarge", "us-east-2", "USE2-Host:ml.g6.xlarge", "Hosting", "1.1267")
    )
    deployed = run("deploy", "gemma-4-e2b", "--model", "google/gemma-4-E2B-it", *FAST)
    assert deployed.exit_code == 0, deployed.stderr
    assert "✅ gemma-4-e2b@us-east-2 InService after" in deployed.stdout
    assert "$1.1267/h per instance" in deployed.stdout
    assert "HF_TOKEN set: passed to the container, never shown" in deployed.stderr
    assert "sagemeter sagemaker delete gemma-4-e2b@us-east-2" in deployed.stdout
    assert (
        world.moto.requests("create_model")[0]["primary_container"]["Environment"]["HF_TOKEN"]
        == TOKEN
    )

    listed = run("list", "--region", "us-east-2")
    assert listed.exit_code == 0, listed.stderr
    assert "gemma-4-e2b@us-east-2" in listed.stdout and "InService" in listed.stdout
    assert "$1.1267" in listed.stdout and "may be billing" in listed.stdout

    status = run("status", "gemma-4-e2b")  # the region comes from the record
    assert status.exit_code == 0, status.stderr
    assert "ml.g6.xlarge x1" in status.stdout

    deleted = run("delete", "gemma-4-e2b@us-east-2", *FAST)
    assert deleted.exit_code == 0, deleted.stderr
    lines = [line.strip() for line in deleted.stdout.splitlines()]
    assert lines[0] == "🗑️ `gemma-4-e2b` in `us-east-2`"
    assert [line.split(" (")[0] for line in lines[1:4]] == [
        "- endpoint: deleted",
        "- endpoint-config: deleted",
        "- model: deleted",
    ]
    assert run("list", "--region", "us-east-2").stdout.startswith(
        "no sagemeter endpoints in us-east-2"
    )
    for output in (deployed, listed, status, deleted):
        assert TOKEN not in output.stdout + output.stderr
    for path in world.ledger_files():
        assert TOKEN not in path.read_text()


def test_a_failed_deploy_prints_the_reason_and_exits_1(world: World) -> None:
    world.moto.initial_status = "Failed"
    world.moto.failure_reason = (
        "CannotStartContainerError. Please ensure the model container is valid."
    )
    result = run("deploy", "gemma-4-e2b", "--model", "google/gemma-4-E2B-it", *FAST)
    assert result.exit_code == 1
    assert "❌ gemma-4-e2b@us-east-2 Failed: CannotStartContainerError" in result.stderr
    assert "sagemeter sagemaker logs gemma-4-e2b@us-east-2" in result.stderr
    assert "- endpoint: deleted" in result.stderr  # cleaned up, and said so


def test_quota_table(world: World) -> None:
    world.quotas.applied["us-east-2"] = [world.quota_item("ml.g6.xlarge for endpoint usage", 1)]
    result = run("quota", "ml.g6.xlarge", "--region", "us-east-2", "--region", "us-west-2")
    assert result.exit_code == 0, result.stderr
    assert "us-east-2" in result.stdout and "applied" in result.stdout
    assert "no quota named" in result.stdout  # us-west-2 has none in this world


def test_price_line_and_override(world: World) -> None:
    world.prices.append(
        world.price_item("ml.g6.xlarge", "us-east-2", "USE2-Host:ml.g6.xlarge", "Hosting", "1.1267")
    )
    result = run("price", "ml.g6.xlarge", "--region", "us-east-2")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(
        "ml.g6.xlarge in us-east-2: $1.1267 per hour (AWS Price List API"
    )
    override = run("price", "ml.g6.xlarge", "--price-per-hour", "0.5")
    assert "$0.5000 per hour (--price-per-hour" in override.stdout


def test_logs_say_no_logs_yet_for_a_missing_group(world: World) -> None:
    result = run("logs", "gemma-4-e2b@us-east-2")
    assert result.exit_code == 0
    assert "no logs yet for gemma-4-e2b in us-east-2" in result.stderr


def test_logs_print_recent_lines_and_follow(world: World) -> None:
    import boto3

    logs = boto3.client("logs", region_name="us-east-2")
    group = "/aws/sagemaker/Endpoints/gemma-4-e2b"
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="AllTraffic/i-0")
    now = int(time.time() * 1000)
    events = [{"timestamp": now + i, "message": f"INFO line {i}"} for i in range(3)]
    logs.put_log_events(logGroupName=group, logStreamName="AllTraffic/i-0", logEvents=events)
    result = run("logs", "gemma-4-e2b@us-east-2", "--lines", "2", "--follow",
                 "--poll-seconds", "0.05", "--follow-seconds", "0.3")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    printed = [line.split(" ", 1)[1] for line in result.stdout.splitlines()]
    assert printed == ["INFO line 1", "INFO line 2"]


def test_invoke_prints_the_reply(runtime: RuntimeFake) -> None:
    result = run("invoke", "gemma-4-e2b@us-east-2", "Say hello.", "--max-tokens", "6")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip()
    assert "tokens in" in result.stderr and "finish:" in result.stderr
    streamed = run("invoke", "gemma-4-e2b@us-east-2", "Say hello.", "--max-tokens", "6", "--stream")
    assert streamed.exit_code == 0 and streamed.stdout.strip() == result.stdout.strip()
    runtime.behaviour["gemma-4-e2b"] = "model-error"
    failed = run("invoke", "gemma-4-e2b@us-east-2", "Say hello.")
    assert "did not answer: ModelError" in _one_error_line(failed)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["deploy", "bad-", "--model", "m", "--region", "us-east-2"], "not a valid endpoint name"),
        (
            ["deploy", "ok", "--model", "m", "--env", "NOEQUALS"],
            "--env 'NOEQUALS': write KEY=VALUE",
        ),
        (["status", "nope@us-east-2"], "no endpoint nope in us-east-2"),
        (["delete", "never-made@us-east-2"], "nothing to delete"),
        (["delete"], "give NAME[@REGION], or --all-mine"),
        (["invoke", "x@mars-1", "hi"], "is not an AWS region"),
    ],
)
def test_user_errors_are_one_line_and_exit_2(world: World, args: list[str], expected: str) -> None:
    assert expected in _one_error_line(run(*args))


def test_missing_role_is_one_line(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SAGEMETER_ROLE_ARN")
    line = _one_error_line(run("deploy", "gemma-4-e2b", "--model", "m"))
    assert "pass --role ARN or set SAGEMETER_ROLE_ARN" in line


def test_no_credentials_is_one_line(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    for args in (["list"], ["quota", "ml.g6.xlarge"], ["delete", "x@us-east-2"]):
        assert "no AWS credentials found: run `aws configure`" in _one_error_line(run(*args))


def test_expired_credentials_and_denied_calls_are_one_line(world: World) -> None:
    world.json_fake.handlers["AWSPriceListService.GetProducts"] = lambda body: (
        400, {"__type": "ExpiredTokenException", "message": "The security token included in the request is expired"}
    )  # fmt: skip
    line = _one_error_line(run("price", "ml.g6.xlarge", "--region", "us-east-2"), code=4)
    assert "AWS rejected the credentials" in line and "aws sso login" in line
    world.json_fake.handlers["AWSPriceListService.GetProducts"] = lambda body: (
        400, {"__type": "AccessDeniedException", "message": "User: arn:aws:iam::123456789012:user/x is not authorized"}
    )  # fmt: skip
    assert "AWS denied pricing:GetProducts" in _one_error_line(
        run("price", "ml.g6.xlarge", "--refresh"), code=4
    )


def test_unreachable_aws_is_one_line(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", "http://127.0.0.1:9")
    line = _one_error_line(run("status", "gemma-4-e2b@us-east-2"), code=4)
    assert (
        "cannot reach AWS in us-east-2" in line and "check the region name and the network" in line
    )


def test_a_call_aws_refuses_exits_4_through_the_real_cli(
    world: World, sagemaker_proxy: SageMakerProxy
) -> None:
    """`python -m sagemeter` (the real entry point): SageMaker throttles DescribeEndpoint on the
    wire, so the cloud failed, not the input: exit 4, one line. A bad name stays exit 2."""
    throttled = Injection(400, "ThrottlingException", "Rate exceeded")
    sagemaker_proxy.inject("DescribeEndpoint", *[throttled] * 10)  # botocore retries a few
    command = [sys.executable, "-m", "sagemeter", "sagemaker", "status", "gemma-4-e2b@us-east-2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 4, done.stderr
    assert len(lines) == 1 and "AWS throttled the request" in lines[0], done.stderr
    assert "DescribeEndpoint" in sagemaker_proxy.operations
    bad = subprocess.run(
        [*command[:-1], "bad-@us-east-2"], capture_output=True, text=True, timeout=120, check=False
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr


@pytest.mark.slow
def test_ctrl_c_during_deploy_exits_130_and_list_shows_the_endpoint(world: World) -> None:
    """A real process and a real SIGINT; moto is driven to keep the endpoint Creating."""
    world.moto.initial_status = "Creating"
    code = "import typer; from sagemeter.cli.sagemaker import register; app = typer.Typer(); register(app); app()"
    process = subprocess.Popen(
        [sys.executable, "-c", code, "sagemaker", "deploy", "gemma-4-e2b", "--model", "google/gemma-4-E2B-it", *FAST],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ), text=True,
    )  # fmt: skip
    assert process.stderr is not None
    seen = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        seen.append(line)
        if "creating Creating" in line or not line:
            break
    assert any("creating Creating" in line for line in seen), seen
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, (stdout, stderr)
    assert "interrupted: gemma-4-e2b in us-east-2 may still be creating" in stderr
    assert (
        "sagemeter sagemaker delete gemma-4-e2b@us-east-2" in stderr and "Traceback" not in stderr
    )
    record = Ledger().get("us-east-2", "gemma-4-e2b")
    assert record is not None and record.active
    listed = run("list", "--region", "us-east-2")
    assert "gemma-4-e2b@us-east-2" in listed.stdout and "Creating" in listed.stdout
    assert "interrupted while waiting for InService" in listed.stdout


def test_progress_line_on_a_terminal_ticks_and_fits_the_width() -> None:
    import io

    from rich.console import Console

    from sagemeter.cli.sagemaker import ProgressLine
    from sagemeter.sagemaker import Progress

    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    line = ProgressLine(console)
    with line:
        line(
            Progress(
                name="gemma-4-e2b", region="us-east-2", phase="creating", status="Creating",
                elapsed_s=120.0, log_line=f"INFO Model loading took 9.75 GiB memory {'x' * 200} {TOKEN}",
            )
        )  # fmt: skip
        text = line.__rich__().plain
    assert text.startswith(
        "⏳ gemma-4-e2b@us-east-2  creating Creating  2.0 min  │ INFO Model loading"
    )
    assert len(text) <= 100 and TOKEN not in text


@pytest.mark.parametrize(
    "target", ["http://x.com@us-east-1", "http://x.com", "local:smollm2-q4_1", "local:x@us-east-1"]
)
@pytest.mark.parametrize("command", ["status", "logs", "delete"])
def test_a_target_that_is_not_a_sagemaker_endpoint_is_one_line(
    world: World, command: str, target: str
) -> None:
    """Not NAME@REGION (an HTTP server, a local checkpoint): one line, exit 2, no traceback."""
    line = _one_error_line(run(command, target))
    assert "is not a SageMaker endpoint; write NAME@REGION" in line


def test_invoke_of_an_http_target_is_one_line(world: World) -> None:
    line = _one_error_line(run("invoke", "http://x.com@us-east-1", "hello"))
    assert "is not a SageMaker endpoint" in line


# --------------------------------------------------------------------------- regions


def test_aws_region_alone_decides_every_command_not_the_profile(world: World) -> None:
    """The issue's trial: AWS_REGION=us-east-2, AWS_DEFAULT_REGION unset, the profile's region
    us-west-2 (the world sets exactly that). Every command must use us-east-2."""
    import os

    assert os.environ["AWS_REGION"] == "us-east-2" and "AWS_DEFAULT_REGION" not in os.environ
    world.prices.append(
        world.price_item("ml.g6.xlarge", "us-east-2", "USE2-Host:ml.g6.xlarge", "Hosting", "1.1267")
    )
    price = run("price", "ml.g6.xlarge")
    assert price.exit_code == 0, price.stderr
    assert price.stdout.startswith("ml.g6.xlarge in us-east-2: $1.1267 per hour")
    deployed = run("deploy", "gemma-4-e2b", "--model", "google/gemma-4-E2B-it", *FAST)
    assert deployed.exit_code == 0, deployed.stderr
    assert "gemma-4-e2b" in world.moto.backend("us-east-2").endpoints
    assert not world.moto.backend("us-west-2").endpoints
    assert run("status", "gemma-4-e2b").exit_code == 0
    logs = run("logs", "gemma-4-e2b")
    assert logs.exit_code == 0 and "no logs yet for gemma-4-e2b in us-east-2" in logs.stderr


def test_aws_default_region_then_the_profile_when_aws_region_is_unset(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.prices.extend(
        [
            world.price_item("ml.g6.xlarge", "us-east-1", "USE1-Host:ml.g6.xlarge", "Hosting", "1.0"),
            world.price_item("ml.g6.xlarge", "us-west-2", "USW2-Host:ml.g6.xlarge", "Hosting", "1.2"),
        ]
    )  # fmt: skip
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    assert "in us-east-1:" in run("price", "ml.g6.xlarge").stdout
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    assert "in us-west-2:" in run("price", "ml.g6.xlarge").stdout  # the profile's
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    line = _one_error_line(run("price", "ml.g6.xlarge"))
    assert "no region given: pass --region or set AWS_REGION" in line
    monkeypatch.setenv("AWS_REGION", "mars")
    assert "'mars' (AWS_REGION) is not an AWS region" in _one_error_line(
        run("price", "ml.g6.xlarge")
    )


@pytest.mark.slow
def test_the_article_recipe_after_a_capacity_fallback(world: World, runtime: RuntimeFake) -> None:
    """us-east-2 (first asked) refuses for quota; the endpoint lands in us-east-1. The deploy
    names the placed target, NAME alone finds it, NAME@us-east-2 says where it is, and the
    attempt in us-east-2 is reported as cleaned up."""
    world.moto.create_endpoint_errors["us-east-2"] = ("ResourceLimitExceeded", "limit is 1")
    deployed = run(
        "deploy", "gemma-4-e2b", "--model", "google/gemma-4-E2B-it",
        "--fallback-region", "us-east-1", *FAST,
    )  # fmt: skip
    assert deployed.exit_code == 0, deployed.stderr
    assert "✅ gemma-4-e2b@us-east-1 InService" in deployed.stdout
    assert "measure: sagemeter measure OUT_DIR gemma-4-e2b@us-east-1" in deployed.stdout
    assert "us-east-2: capacity: ResourceLimitExceeded" in deployed.stderr
    assert "🗑️ `gemma-4-e2b` in `us-east-2`" in deployed.stderr
    assert "- model: deleted" in deployed.stderr
    assert "image 763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.30.0-" in deployed.stderr

    target = run("status", "gemma-4-e2b", "--print-target")
    assert target.exit_code == 0 and target.stdout.strip() == "gemma-4-e2b@us-east-1"

    runtime.placed["gemma-4-e2b"] = "us-east-1"
    wrong = run("invoke", "gemma-4-e2b@us-east-2", "Say hi.", "--max-tokens", "4")
    assert "sagemeter placed gemma-4-e2b in us-east-1" in _one_error_line(wrong)
    answered = run("invoke", "gemma-4-e2b", "Say hi.", "--max-tokens", "4")
    assert answered.exit_code == 0, answered.stderr
    assert runtime.requests[-1]["region"] == "us-east-1"

    refused = _one_error_line(run("delete", "gemma-4-e2b@us-east-2", *FAST))
    assert "nothing to delete: no endpoint gemma-4-e2b in us-east-2" in refused
    assert "use gemma-4-e2b@us-east-1, or gemma-4-e2b alone" in refused
    deleted = run("delete", "gemma-4-e2b", *FAST)
    assert deleted.exit_code == 0, deleted.stderr
    assert "🗑️ `gemma-4-e2b` in `us-east-1`" in deleted.stdout
    assert not world.moto.backend("us-east-1").endpoints


def test_list_all_shows_every_endpoint_and_says_why_a_price_is_missing(world: World) -> None:
    import boto3

    client = boto3.client("sagemaker", region_name="us-east-2")
    client.create_model(ModelName="m", ExecutionRoleArn=world.role, PrimaryContainer={"Image": "x"})
    client.create_endpoint_config(
        EndpointConfigName="c",
        ProductionVariants=[
            {"VariantName": "v", "ModelName": "m", "InstanceType": "ml.m5.large", "InitialInstanceCount": 1}
        ],
    )  # fmt: skip
    client.create_endpoint(EndpointName="someone-elses", EndpointConfigName="c")
    assert "no sagemeter endpoints in us-east-2" in run("list", "--region", "us-east-2").stdout
    listed = run("list", "--all", "--region", "us-east-2")
    assert listed.exit_code == 0, listed.stderr
    assert "someone-elses@us-east-2" in listed.stdout and "not sagemeter's" in listed.stdout
    assert "no price: the AWS Price List has no on-demand real-time" in listed.stdout
    assert "may be billing" not in listed.stdout  # someone else's endpoint is not ours to stop
    assert "1 endpoint that is not sagemeter's is running" in listed.stdout


# --------------------------------------------------------------------------- role


@pytest.mark.slow
def test_role_create_waits_for_iam_and_grants_only_what_the_docs_say(
    world: World, sagemaker_proxy: SageMakerProxy
) -> None:
    """Proxy: IAM answers NoSuchEntity to the first two GetRole calls after creating the role,
    as an eventually consistent read does; `role create` waits them out."""
    import boto3

    from sagemeter.sagemaker.role import TRUST_POLICY, permissions_policy

    missing = Injection(
        404, "NoSuchEntity", "The role with name sagemeter-endpoint cannot be found."
    )
    sagemaker_proxy.inject("GetRole", missing, missing)
    made = run("role", "create", "sagemeter-endpoint", "--poll-seconds", "0.02")
    assert made.exit_code == 0, made.stderr
    arn = "arn:aws:iam::123456789012:role/sagemeter-endpoint"
    assert made.stdout.strip() == f"export SAGEMETER_ROLE_ARN={arn}"
    assert "waiting for IAM to show role sagemeter-endpoint" in made.stderr
    assert sagemaker_proxy.operations.count("GetRole") == 3
    iam = boto3.client("iam", region_name="us-east-1")
    role = iam.get_role(RoleName="sagemeter-endpoint")["Role"]
    assert role["AssumeRolePolicyDocument"] == TRUST_POLICY
    assert iam.list_role_policies(RoleName="sagemeter-endpoint")["PolicyNames"] == [
        "sagemeter-endpoint"
    ]
    granted = iam.get_role_policy(RoleName="sagemeter-endpoint", PolicyName="sagemeter-endpoint")
    assert granted["PolicyDocument"] == permissions_policy()
    assert not iam.list_attached_role_policies(RoleName="sagemeter-endpoint")["AttachedPolicies"]
    # docs/sagemaker.md shows exactly these two documents.
    docs = _doc_json_blocks()
    assert TRUST_POLICY in docs and permissions_policy() in docs

    again = run("role", "create", "sagemeter-endpoint")
    assert again.exit_code == 0 and "exists (sagemeter's)" in again.stderr
    removed = run("role", "delete", "sagemeter-endpoint")
    assert removed.exit_code == 0, removed.stderr
    assert "role sagemeter-endpoint: deleted" in removed.stdout


def test_role_create_refuses_a_role_it_did_not_make(world: World) -> None:
    import boto3

    iam = boto3.client("iam", region_name="us-east-1")
    iam.create_role(RoleName="theirs", AssumeRolePolicyDocument=json.dumps({"Statement": []}))
    line = _one_error_line(run("role", "create", "theirs"))
    assert "already exists and sagemeter did not make it" in line
    assert "not tagged as sagemeter's" in _one_error_line(run("role", "delete", "theirs"))
    assert iam.list_role_policies(RoleName="theirs")["PolicyNames"] == []


def _doc_json_blocks() -> list[object]:
    text = (Path(__file__).parents[2] / "docs" / "sagemaker.md").read_text()
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, re.S)]
