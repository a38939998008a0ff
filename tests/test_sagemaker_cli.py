"""The SageMaker commands through typer's CliRunner (and one real subprocess for Ctrl-C).

Everything below the CLI is real: boto3 against moto's server and the loopback fakes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest
import typer
from typer.testing import CliRunner, Result

from sagemeter.backends.sagemaker.ledger import Ledger
from sagemeter.cli_sagemaker import register

if TYPE_CHECKING:
    from tests.sagemaker_fakes import RuntimeFake, World


TOKEN = "hf_CLITOKENCLITOKENCLI123456"
FAST = ["--poll-seconds", "0.02"]


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def run(*args: str) -> Result:
    return CliRunner().invoke(_app(), list(args))


def _one_error_line(result: Result) -> str:
    assert result.exit_code == 2, (result.stdout, result.stderr)
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
    assert "sagemeter delete gemma-4-e2b@us-east-2" in deployed.stdout
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
    assert "sagemeter logs gemma-4-e2b@us-east-2" in result.stderr
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
    line = _one_error_line(run("price", "ml.g6.xlarge", "--region", "us-east-2"))
    assert "AWS rejected the credentials" in line and "aws sso login" in line
    world.json_fake.handlers["AWSPriceListService.GetProducts"] = lambda body: (
        400, {"__type": "AccessDeniedException", "message": "User: arn:aws:iam::123456789012:user/x is not authorized"}
    )  # fmt: skip
    assert "AWS denied pricing:GetProducts" in _one_error_line(
        run("price", "ml.g6.xlarge", "--refresh")
    )


def test_unreachable_aws_is_one_line(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", "http://127.0.0.1:9")
    line = _one_error_line(run("status", "gemma-4-e2b@us-east-2"))
    assert (
        "cannot reach AWS in us-east-2" in line and "check the region name and the network" in line
    )


def test_ctrl_c_during_deploy_exits_130_and_list_shows_the_endpoint(world: World) -> None:
    """A real process and a real SIGINT; moto is driven to keep the endpoint Creating."""
    world.moto.initial_status = "Creating"
    code = "import typer; from sagemeter.cli_sagemaker import register; app = typer.Typer(); register(app); app()"
    process = subprocess.Popen(
        [sys.executable, "-c", code, "deploy", "gemma-4-e2b", "--model", "google/gemma-4-E2B-it", *FAST],
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
    assert "sagemeter delete gemma-4-e2b@us-east-2" in stderr and "Traceback" not in stderr
    record = Ledger().get("us-east-2", "gemma-4-e2b")
    assert record is not None and record.active
    listed = run("list", "--region", "us-east-2")
    assert "gemma-4-e2b@us-east-2" in listed.stdout and "Creating" in listed.stdout
    assert "interrupted while waiting for InService" in listed.stdout


def test_progress_line_on_a_terminal_ticks_and_fits_the_width() -> None:
    import io

    from rich.console import Console

    from sagemeter.backends.sagemaker import Progress
    from sagemeter.cli_sagemaker import ProgressLine

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
