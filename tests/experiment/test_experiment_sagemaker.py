"""`sagemeter run` with SageMaker arms, as a user runs it (a real subprocess), against moto's
server and the loopback runtime, which forwards to a known-truth server.

A capacity failure that falls back to another region (measured, priced and deleted where it was
placed), SIGTERM while an endpoint is Creating (waited out, then deleted: nothing left in moto),
the spend cap stopping the run, a `kill -9` that `sagemeter sagemaker list` sees and `--resume` finishes,
and a cap the estimate already exceeds (one line, nothing created).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.sagemaker.ledger import Ledger
from tests.cli_run import invoke
from tests.sagemaker_fakes import RuntimeFake, World

pytestmark = [pytest.mark.slow, pytest.mark.long(90)]  # seconds (tests/long_modules.py)

REGIONS = ("us-east-1", "us-east-2", "us-west-2")
FAST = ("--poll-seconds", "0.05")


@pytest.fixture(scope="module")
def runtime_fake() -> Iterator[RuntimeFake]:
    """The loopback runtime in front of a known-truth server rather than the embedded engine:
    these runs are about endpoints' lifecycles, and the truth server answers in milliseconds
    (the real engine behind the runtime is tested in test_sagemaker_measure.py). 5 ms a token
    puts --quick's long replies 220 ms behind its short ones: at 2 ms (88 ms) a busy host's
    stall on both short replies once left no decode rate ("long replies were not slower than
    short ones") and the run incomplete, about 0.5 s more a measurement."""
    with running_truth_server(TruthTiming(ttft_s=0.01, itl_s=0.005)) as url:
        fake = RuntimeFake(url + "/v1")
        yield fake
        fake.close()


# These runs are about endpoints' lifecycles, not figures: one load level and three 8-token
# questions per measurement (still a complete result with a load figure to price) take about
# 2 s off a three-measurement run.
def plan_text(
    top: str = "", arm: str = "", regions: str = 'fallback_regions = ["us-east-1"]'
) -> str:
    return f"""name = "gemma"
{top}
[measure]
quick = true
levels = "1"
questions_per_family = 1
quality_max_tokens = 8

[[arm]]
name = "bf16"
[arm.sagemaker]
model = "google/gemma-4-E2B-it"
region = "us-east-2"
{regions}
{arm}

[[arm]]
name = "qat"
[arm.sagemaker]
model = "google/gemma-4-E2B-it-qat-w4a16-ct"
region = "us-east-2"
{regions}
{arm}
"""


def sagemeter(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagemeter", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
        timeout=timeout,
        check=False,
    )


def start(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "sagemeter", *args],
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_until(stream: IO[str], needle: str, seen: list[str], timeout_s: float = 120) -> None:
    """Read lines until one holds `needle` (the lines go to `seen`)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return
    raise AssertionError(f"never saw {needle!r}:\n{''.join(seen)}")


def nothing_left(world: World) -> None:
    """No endpoint, endpoint config or model in any region, and no record that may exist."""
    for region in REGIONS:
        backend = world.moto.backend(region)
        assert not backend.endpoints, (region, list(backend.endpoints))
        assert not backend.endpoint_configs, (region, list(backend.endpoint_configs))
        assert not backend._models, (region, list(backend._models))
    assert Ledger().active() == []


def journal_of(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "journal.json").read_text())
    return data


def price(world: World, instance: str, region: str, usd: str) -> None:
    prefix = {"us-east-1": "", "us-east-2": "USE2-", "us-west-2": "USW2-"}[region]
    world.prices.append(
        world.price_item(instance, region, f"{prefix}Host:{instance}", "Hosting", usd)
    )


def test_capacity_fallback_measures_prices_and_deletes_where_it_was_placed(
    world: World, runtime: RuntimeFake, tmp_path: Path
) -> None:
    """us-east-2 refuses for capacity; each deploy lands in us-east-1 on the InstancePools type
    SageMaker placed there. That region and type are what is measured, priced and deleted."""
    world.moto.create_endpoint_errors["us-east-2"] = ("ResourceLimitExceeded", "limit is 0")
    world.moto.placed_types["us-east-1"] = "ml.g6.2xlarge"
    for region in ("us-east-1", "us-east-2"):
        price(world, "ml.g6.xlarge", region, "1.1267")
        price(world, "ml.g6.2xlarge", region, "1.6")
        world.quotas.applied[region] = [
            world.quota_item("ml.g6.xlarge for endpoint usage", 1),
            world.quota_item("ml.g6.2xlarge for endpoint usage", 0),
        ]
    for name in ("gemma-bf16", "gemma-qat"):
        runtime.placed[name] = "us-east-1"  # asked of us-east-2's runtime: "not found"
    (tmp_path / "plan.toml").write_text(
        plan_text(arm='fallback_instance_types = ["ml.g6.2xlarge"]')
    )

    planned = sagemeter("run", "plan.toml", "--dry-run", cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    assert (
        "model, endpoint config and endpoint gemma-bf16 (ml.g6.xlarge / ml.g6.2xlarge x1) in "
        "us-east-2, else us-east-1" in planned.stdout
    )
    assert "price of bf16: $1.6000/h (ml.g6.2xlarge in us-east-2, the highest" in planned.stdout, (
        planned.stdout
    )
    assert "quota ml.g6.xlarge (needs 1 at once): us-east-2 1 free of 1 ok" in planned.stdout
    assert "quota ml.g6.2xlarge (needs 1 at once): us-east-2 0 free of 0 too few" in planned.stdout
    assert "nothing was created" in planned.stdout
    assert world.moto.calls == []

    done = sagemeter("run", "plan.toml", "--out", "run", *FAST, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        "InService as gemma-bf16@us-east-1 (ml.g6.2xlarge x1, $1.6000/h per instance); before: "
        "us-east-2: capacity" in done.stderr
    )
    run = tmp_path / "run"
    for name, endpoint in (
        ("bf16", "gemma-bf16"),
        ("qat", "gemma-qat"),
        ("bf16-again", "gemma-bf16"),
    ):
        result = json.loads((run / f"measure-{name}.json").read_text())
        environment = result["detail"]["environment"]
        assert environment["target"] == f"{endpoint}@us-east-1"
        server = environment["server"]
        assert (server["priced_instance_type"], server["hourly_usd"]) == ("ml.g6.2xlarge", 1.6)
    assert {request["region"] for request in runtime.requests} == {"us-east-1"}
    journal = journal_of(run)
    assert journal["state"] == "done"
    assert [d["record"]["region"] for d in journal["deployments"]] == ["us-east-1"] * 3
    for deployment in journal["deployments"]:
        assert deployment["platform"] == "sagemaker"
        assert deployment["record"]["placed_instance_type"] == "ml.g6.2xlarge"
        assert deployment["instance_type"] == "ml.g6.2xlarge"
        assert deployment["hourly_usd"] == 1.6 and deployment["state"] == "deleted"
        assert deployment["attempts"][0].startswith("us-east-2: capacity")
    assert journal["cost_usd"] > 0
    comparison = json.loads((run / "compare.json").read_text())
    assert comparison["names"] == ["bf16", "qat", "bf16-again"] and comparison["order"] == "ABA"
    assert comparison["price_per_hour"] == 1.6  # the placed type's, recorded at deploy
    assert any(row["key"].startswith("usd_per_million_tokens") for row in comparison["rows"])
    assert "us-east-1" in (run / "report.md").read_text()
    deletes = [c for c in world.moto.calls if c[0] == "create_endpoint"]
    assert [region for _, region, _ in deletes] == ["us-east-2", "us-east-1"] * 3
    nothing_left(world)


def test_sigterm_while_creating_waits_it_out_then_deletes_everything(
    world: World, tmp_path: Path
) -> None:
    world.moto.initial_status = "Creating"
    (tmp_path / "plan.toml").write_text(plan_text(top="price_per_hour = 1.1267"))
    process = start("run", "plan.toml", "--out", "run", *FAST, cwd=tmp_path)
    assert process.stderr is not None
    seen: list[str] = []
    read_until(process.stderr, "creating Creating", seen)
    process.send_signal(signal.SIGTERM)
    read_until(process.stderr, "waiting for Creating to end before deleting", seen)
    assert world.moto.backend("us-east-2").endpoints  # still there, still Creating
    world.moto.set_status("us-east-2", "gemma-bf16", "InService")
    _, rest = process.communicate(timeout=120)
    stderr = "".join(seen) + rest
    assert process.returncode == 143, stderr
    assert "SIGTERM: stopping" in stderr
    assert "deleting gemma-bf16@us-east-2 (still Creating: waiting until SageMaker allows it)" in (
        stderr
    )
    assert "deleted everything this run created (gemma-bf16@us-east-2)" in stderr
    assert "Traceback" not in stderr
    journal = journal_of(tmp_path / "run")
    assert journal["state"] == "stopped" and journal["stopped_because"] == "SIGTERM"
    assert journal["steps"][0]["state"] == "stopped"
    assert [d["state"] for d in journal["deployments"]] == ["deleted"]
    nothing_left(world)


def test_the_spend_cap_stops_the_run_and_deletes_what_it_made(world: World, tmp_path: Path) -> None:
    """$3,600 an hour is a dollar a second: the cap of $5 is reached while the first endpoint is
    still Creating (the estimate, at the plan's own assumptions, stays below it)."""
    world.moto.initial_status = "Creating"
    price(world, "ml.g6.xlarge", "us-east-2", "3600")
    top = (
        "max_cost_usd = 5\n"
        "[estimate]\ntokens_per_second = 1000000\ndeploy_minutes = 0\ndelete_minutes = 0\n"
    )
    (tmp_path / "plan.toml").write_text(plan_text(top=top, regions=""))
    process = start("run", "plan.toml", "--out", "run", *FAST, cwd=tmp_path)
    assert process.stderr is not None
    seen: list[str] = []
    read_until(process.stderr, "waiting for Creating to end before deleting", seen)
    world.moto.set_status("us-east-2", "gemma-bf16", "InService")
    _, rest = process.communicate(timeout=120)
    stderr = "".join(seen) + rest
    assert process.returncode == 1, stderr
    assert "stopped: the spend cap: $5." in stderr and "of max_cost_usd $5.00" in stderr
    assert "deleted everything this run created (gemma-bf16@us-east-2)" in stderr
    journal = journal_of(tmp_path / "run")
    assert journal["state"] == "stopped"
    assert journal["stopped_because"].startswith("the spend cap")
    assert journal["cost_usd"] >= 5
    assert not list((tmp_path / "run").glob("measure-*.json"))
    nothing_left(world)


def test_a_cap_the_estimate_exceeds_is_one_line_and_creates_nothing(
    world: World, tmp_path: Path
) -> None:
    (tmp_path / "plan.toml").write_text(
        plan_text(top="price_per_hour = 1.1267\nmax_cost_usd = 0.5")
    )
    refused = sagemeter("run", "plan.toml", "--out", "run", cwd=tmp_path)
    assert refused.returncode == 2
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in refused.stderr
    assert lines[0].startswith("error: max_cost_usd: $0.50 is below the estimated cost:")
    assert "10 min per deploy" in lines[0]
    assert not (tmp_path / "run").exists()
    assert world.moto.calls == []


def _as_written_before_platforms(run_dir: Path) -> None:
    """The journal rewritten in the shape sagemeter wrote before platforms were plug-ins:
    schema /1, each deployment with SageMaker's fields at its top level."""
    journal = journal_of(run_dir)
    journal["schema"] = "sagemeter-experiment-journal/1"
    for deployment in journal["deployments"]:
        assert deployment.pop("platform") == "sagemaker"
        deployment.pop("target"), deployment.pop("instance_type")
        deployment.update(deployment.pop("record"))
    (run_dir / "journal.json").write_text(json.dumps(journal, indent=2))


@pytest.mark.parametrize("old_journal", [False, True], ids=["journal", "journal-before-platforms"])
def test_kill_9_while_creating_shows_in_list_and_resume_finishes(
    world: World, runtime: RuntimeFake, tmp_path: Path, old_journal: bool
) -> None:
    world.moto.initial_status = "Creating"
    price(world, "ml.g6.xlarge", "us-east-2", "1.1267")
    # A then B: the killed arm is adopted and B deployed; an A' arm would only measure again.
    (tmp_path / "plan.toml").write_text(plan_text(top='order = "AB"', regions=""))
    process = start("run", "plan.toml", "--out", "run", *FAST, cwd=tmp_path)
    assert process.stderr is not None
    read_until(process.stderr, "creating Creating", [])
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    journal = journal_of(tmp_path / "run")
    assert journal["state"] == "running"
    assert journal["deployments"][0]["state"] == "deploying"
    if old_journal:
        _as_written_before_platforms(tmp_path / "run")
        assert journal_of(tmp_path / "run")["deployments"][0]["endpoint"] == "gemma-bf16"

    # The listing reads moto and the ledger, nothing of the killed process: in this process
    # (no interpreter to start).
    listed = invoke(
        ["sagemaker", "list", "--region", "us-east-2"], {**os.environ, "COLUMNS": "200"}, tmp_path
    )
    assert "gemma-bf16@us-east-2" in listed.stdout and "Creating" in listed.stdout

    world.moto.set_status("us-east-2", "gemma-bf16", "InService")
    world.moto.initial_status = "InService"
    resumed = sagemeter("run", "--resume", "run", *FAST, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "gemma-bf16@us-east-2 is InService from before: measuring it" in resumed.stderr
    journal = journal_of(tmp_path / "run")
    assert journal["state"] == "done" and len(journal["sessions"]) == 2
    assert len(journal["deployments"]) == 2  # the one from before was used, not deployed again
    assert journal["schema"] == "sagemeter-experiment-journal/2"
    adopted = journal["deployments"][0]
    assert (adopted["platform"], adopted["target"]) == ("sagemaker", "gemma-bf16@us-east-2")
    assert adopted["record"]["region"] == "us-east-2" and adopted["state"] == "deleted"
    creates = [c for c in world.moto.calls if c[0] == "create_endpoint"]
    assert len(creates) == 2
    nothing_left(world)


def test_arm_problems_name_their_key_before_anything_starts(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every arm's problem in one run (one line each), named by its plan key, before anything is
    created."""

    def refused(text: str) -> list[str]:
        (tmp_path / "plan.toml").write_text(text)
        done = sagemeter("run", "plan.toml", "--out", "run", cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        assert not (tmp_path / "run").exists()
        return [line for line in done.stderr.splitlines() if line.strip()]

    lines = refused(plan_text(arm='instance_type = "ml.g9.huge"'))
    assert lines[0] == "error: plan.toml: 2 problems, one a line:"
    assert lines[1].startswith("  arm \"bf16\".sagemaker.instance_type: 'ml.g9.huge' is not")
    assert lines[2].startswith("  arm \"qat\".sagemaker.instance_type: 'ml.g9.huge' is not")
    assert len(lines) == 3
    lines = refused(plan_text(arm="fallback_regions = []"))  # also given above: TOML says twice
    assert len(lines) == 1 and "not valid TOML" in lines[0]

    import boto3

    client = boto3.client("sagemaker", region_name="us-east-1")
    client.create_model(ModelName="m", ExecutionRoleArn=world.role,
                        PrimaryContainer={"Image": "example.com/x:1"})  # fmt: skip
    client.create_endpoint_config(
        EndpointConfigName="c",
        ProductionVariants=[
            {
                "VariantName": "v",
                "ModelName": "m",
                "InitialInstanceCount": 1,
                "InstanceType": "ml.g6.xlarge",
            }
        ],
    )
    client.create_endpoint(EndpointName="gemma-qat", EndpointConfigName="c")
    lines = refused(plan_text())
    assert len(lines) == 1
    assert lines[0].startswith(
        'error: arm "qat": an endpoint named gemma-qat already exists in us-east-1 (InService)'
    )
    creates = len(world.moto.calls)

    monkeypatch.delenv("SAGEMETER_ROLE_ARN")
    no_questions = 'quick = true\nquestions = "no-such.json"'
    lines = refused(plan_text(regions="").replace("quick = true", no_questions))
    assert lines[0] == "error: plan.toml: 3 problems, one a line:", lines
    assert any("no-such.json" in line for line in lines[1:])
    for arm in ("bf16", "qat"):
        assert any(
            f'pass arm "{arm}".sagemaker.role or set SAGEMETER_ROLE_ARN' in line for line in lines
        )
    assert len(world.moto.calls) == creates  # the refusals created nothing


def test_a_second_ctrl_c_leaves_the_rest_to_resume_and_says_what_still_runs(
    world: World, runtime: RuntimeFake, tmp_path: Path
) -> None:
    world.moto.initial_status = "Creating"
    price(world, "ml.g6.xlarge", "us-east-2", "1.1267")
    (tmp_path / "plan.toml").write_text(plan_text(top='order = "AB"', regions=""))
    process = start("run", "plan.toml", "--out", "run", *FAST, cwd=tmp_path)
    assert process.stderr is not None
    seen: list[str] = []
    read_until(process.stderr, "creating Creating", seen)
    process.send_signal(signal.SIGINT)
    read_until(process.stderr, "waiting for Creating to end before deleting", seen)
    process.send_signal(signal.SIGINT)
    _, rest = process.communicate(timeout=60)
    stderr = "".join(seen) + rest
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "still running (it bills until deleted): gemma-bf16@us-east-2 (deleting, " in stderr
    assert "ml.g6.xlarge x1, $1.1267/h" in stderr
    assert (
        "finish with `sagemeter run --resume run`, or `sagemeter sagemaker delete gemma-bf16@us-east-2`"
        in stderr
    )
    journal = journal_of(tmp_path / "run")
    assert journal["state"] == "stopped" and "left to --resume" in journal["stopped_because"]
    assert Ledger().active()  # recorded, so `sagemeter sagemaker list` shows it

    world.moto.set_status("us-east-2", "gemma-bf16", "InService")
    world.moto.initial_status = "InService"
    resumed = sagemeter("run", "--resume", "run", *FAST, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    nothing_left(world)


def test_interleaved_sagemaker_arms_are_live_together_and_all_deleted(
    world: World, runtime: RuntimeFake, tmp_path: Path
) -> None:
    price(world, "ml.g6.xlarge", "us-east-2", "1.1267")
    (tmp_path / "plan.toml").write_text(plan_text(top='order = "interleaved"', regions=""))
    done = sagemeter("run", "plan.toml", "--out", "run", *FAST, cwd=tmp_path)
    assert done.returncode in (0, 3), done.stderr  # 3: a figure missing on a busy host
    journal = journal_of(tmp_path / "run")
    assert [step["label"] for step in journal["steps"]] == [
        "deploy bf16",
        "deploy qat",
        "measure bf16, qat (interleaved)",
        "delete bf16",
        "delete qat",
        "combine",
        "report",
    ]
    first, second = journal["deployments"]
    assert second["live_utc"] < first["deleted_utc"]  # both live while measured
    names = [request["name"] for request in runtime.requests]
    switches = sum(1 for x, y in itertools.pairwise(names) if x != y)
    assert set(names) == {"gemma-bf16", "gemma-qat"} and switches >= 10
    comparison = json.loads((tmp_path / "run" / "compare.json").read_text())
    assert comparison["order"] == "interleaved" and comparison["price_per_hour"] == 1.1267
    nothing_left(world)


def test_the_documented_plan_dry_runs(world: World, tmp_path: Path) -> None:
    """docs/experiments.md's plan, as written there, checks out and plans its 11 steps."""
    docs = Path(__file__).resolve().parents[2] / "docs" / "experiments.md"
    text = docs.read_text().split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "plan.toml").write_text(text)
    price(world, "ml.g6.xlarge", "us-east-2", "1.1267")
    planned = sagemeter("run", "plan.toml", "--dry-run", cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    assert "plan gemma-4-e2b-qat-vs-bf16: 2 arms, order ABA, 11 steps" in planned.stdout
    assert "price of bf16: $1.1267/h (price_per_hour)" in planned.stdout
    assert "spend cap $25.00" in planned.stdout
    assert world.moto.calls == []


def test_a_failed_step_deletes_what_the_run_made(
    world: World, runtime: RuntimeFake, tmp_path: Path
) -> None:
    """The endpoint deploys, then answers every request with a model error: the measure step
    fails, and the endpoint is deleted before the command exits 1."""
    runtime.behaviour["gemma-bf16"] = "model-error"
    (tmp_path / "plan.toml").write_text(plan_text(top="price_per_hour = 1.1267", regions=""))
    done = sagemeter("run", "plan.toml", "--out", "run", *FAST, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "[2/11] measure bf16 failed" in done.stderr
    assert "failed: measure bf16 failed: target gemma-bf16@us-east-2 does not answer" in done.stderr
    assert "deleted everything this run created (gemma-bf16@us-east-2)" in done.stderr
    assert "Traceback" not in done.stderr
    journal = journal_of(tmp_path / "run")
    assert journal["state"] == "failed"
    assert [step["state"] for step in journal["steps"][:3]] == ["done", "failed", "pending"]
    assert not (tmp_path / "run" / "measure-bf16.json").exists()
    nothing_left(world)


def test_a_closed_terminal_while_measuring_deletes_the_endpoint_and_exits_129(
    world: World, runtime: RuntimeFake, tmp_path: Path
) -> None:
    """An SSH session that drops: SIGHUP, and every later write to the terminal fails. The stop
    must still delete what the run made (a failed write had ended it before the teardown)."""
    import pty

    (tmp_path / "plan.toml").write_text(plan_text(top="price_per_hour = 1.1267"))
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "sagemeter", "run", "plan.toml", "--out", "run", *FAST],
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200"},
        stdin=slave,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    journal_file = tmp_path / "run" / "journal.json"
    deadline = time.monotonic() + 120
    while not (runtime.requests and journal_file.exists()):
        assert process.poll() is None and time.monotonic() < deadline
        with contextlib.suppress(OSError):  # keep the terminal drained while it is there
            while select.select([master], [], [], 0.02)[0] and os.read(master, 65536):
                pass
    os.close(master)
    process.send_signal(signal.SIGHUP)
    assert process.wait(timeout=120) == 129
    journal = journal_of(tmp_path / "run")
    assert journal["state"] == "stopped" and journal["stopped_because"] == "SIGHUP"
    assert [d["state"] for d in journal["deployments"]] == ["deleted"]
    nothing_left(world)
