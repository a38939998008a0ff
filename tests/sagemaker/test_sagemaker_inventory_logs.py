"""status, list (orphans), logs and start-up facts, through real boto3 against moto's server.

CloudWatch Logs is moto as is: the test writes the container's lines with plain boto3, the way
SageMaker writes them, into /aws/sagemaker/Endpoints/NAME.
"""

from __future__ import annotations

import contextlib
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from sagemeter import sagemaker as sm
from sagemeter.errors import UserError
from sagemeter.sagemaker.ledger import Ledger
from sagemeter.sagemaker.spec import ownership_tags
from tests.conftest import reference_file
from tests.sagemaker_fakes import not_found

if TYPE_CHECKING:
    from tests.sagemaker_fakes import SageMakerProxy, World

POLL = 0.02


def _spec(world: World, name: str = "gemma-4-e2b", **extra: Any) -> sm.DeploySpec:
    return sm.make_spec(
        name=name,
        model_id="google/gemma-4-E2B-it",
        region="us-east-2",
        role_arn=world.role,
        **extra,
    )


def _foreign_sagemeter_endpoint(world: World, name: str) -> None:
    """An endpoint tagged as sagemeter's but made elsewhere: not in this machine's ledger."""
    tags = ownership_tags(_spec(world, name), "us-east-2", "x", "2026-09-25T18:36:00Z", False)
    client = boto3.client("sagemaker", region_name="us-east-2")
    client.create_model(
        ModelName=name, ExecutionRoleArn=world.role, PrimaryContainer={"Image": "x"}, Tags=tags
    )
    client.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InstanceType": "ml.g6.xlarge",
                "InitialInstanceCount": 1,
            }
        ],
        Tags=tags,
    )
    client.create_endpoint(EndpointName=name, EndpointConfigName=name, Tags=tags)


def test_list_shows_ours_with_cost_marks_orphans_and_skips_foreign(world: World) -> None:
    sm.deploy(_spec(world), poll_s=POLL, price_per_hour=1.1267)
    _foreign_sagemeter_endpoint(world, "made-elsewhere")
    client = boto3.client("sagemaker", region_name="us-east-2")
    client.create_model(
        ModelName="plain", ExecutionRoleArn=world.role, PrimaryContainer={"Image": "x"}
    )
    client.create_endpoint_config(
        EndpointConfigName="plain",
        ProductionVariants=[
            {
                "VariantName": "v",
                "ModelName": "plain",
                "InstanceType": "ml.m5.large",
                "InitialInstanceCount": 1,
            }
        ],
    )
    client.create_endpoint(EndpointName="not-ours", EndpointConfigName="plain")

    inventory = sm.list_endpoints(["us-east-2"])
    by_name = {info.name: info for info in inventory.endpoints}
    assert set(by_name) == {"gemma-4-e2b", "made-elsewhere"}
    ours = by_name["gemma-4-e2b"]
    assert (ours.status, ours.recorded, ours.orphan) == ("InService", True, False)
    assert ours.instance_types == ["ml.g6.xlarge"] and ours.instance_count == 1
    assert ours.hourly_usd == pytest.approx(1.1267) and ours.price_note == "recorded at deploy"
    assert ours.cost_so_far_usd is not None and ours.cost_so_far_usd >= 0
    orphan = by_name["made-elsewhere"]
    assert orphan.orphan and orphan.ours and not orphan.recorded
    assert "orphan" in (orphan.note or "")

    # --all: every endpoint in the region, someone else's marked as such, with its price.
    world.prices.append(
        world.price_item("ml.m5.large", "us-east-2", "USE2-Host:ml.m5.large", "Hosting", "0.115")
    )
    everything = {
        info.name: info for info in sm.list_endpoints(["us-east-2"], all_endpoints=True).endpoints
    }
    assert set(everything) == {"gemma-4-e2b", "made-elsewhere", "not-ours"}
    theirs = everything["not-ours"]
    assert (theirs.ours, theirs.recorded, theirs.note) == (False, False, "not sagemeter's")
    assert theirs.instance_types == ["ml.m5.large"] and theirs.status == "InService"
    assert theirs.hourly_usd == pytest.approx(0.115)
    assert everything["gemma-4-e2b"].ours


def test_a_missing_price_says_why_in_list_and_status(world: World) -> None:
    """The Price List fake has no price for the type: the row keeps `?` and the reason."""
    sm.deploy(_spec(world), poll_s=POLL)
    [info] = sm.list_endpoints(["us-east-2"]).endpoints
    assert info.hourly_usd is None and info.cost_so_far_usd is None
    assert "no on-demand real-time Hosting price for ml.g6.xlarge in us-east-2" in (
        info.price_note or ""
    )
    status = sm.endpoint_status("gemma-4-e2b", "us-east-2")
    assert status.hourly_usd is None and "pass --price-per-hour" in (status.price_note or "")


def test_status_reports_one_endpoint_and_refuses_unknown_names(world: World) -> None:
    """Driven: moto reports the pool SageMaker placed (ml.g5.xlarge, the second asked for)."""
    world.moto.placed_types["us-east-2"] = "ml.g5.xlarge"
    sm.deploy(_spec(world, fallback_instance_types=["ml.g5.xlarge"]), poll_s=POLL)
    info = sm.endpoint_status("gemma-4-e2b", "us-east-2", price_per_hour=2.0)
    assert info.status == "InService" and info.ours and info.recorded
    assert info.instance_types == info.placed_instance_types == ["ml.g5.xlarge"]
    assert info.hourly_usd == 2.0
    with pytest.raises(UserError, match="no endpoint nope in us-east-2"):
        sm.endpoint_status("nope", "us-east-2")


def test_a_name_asked_for_in_the_wrong_region_says_where_it_was_placed(world: World) -> None:
    """After a capacity fallback the endpoint runs in us-east-1; asking us-east-2 (the region
    first tried) gets one line naming where it is, and nothing is deleted."""
    world.moto.create_endpoint_errors["us-east-2"] = ("ResourceLimitExceeded", "limit is 1")
    result = sm.deploy(_spec(world, fallback_regions=["us-east-1"]), poll_s=POLL)
    assert result.region == "us-east-1" and result.in_service
    expected = (
        "sagemeter placed gemma-4-e2b in us-east-1 (a capacity fallback region): use "
        "gemma-4-e2b@us-east-1, or gemma-4-e2b alone"
    )
    with pytest.raises(UserError) as status:
        sm.endpoint_status("gemma-4-e2b", "us-east-2")
    assert str(status.value) == f"no endpoint gemma-4-e2b in us-east-2: {expected}"
    with pytest.raises(UserError) as deleted:
        sm.delete("gemma-4-e2b", "us-east-2", poll_s=POLL)
    assert str(deleted.value) == (
        f"nothing to delete: no endpoint gemma-4-e2b in us-east-2; {expected}"
    )
    assert "gemma-4-e2b" in world.moto.backend("us-east-1").endpoints


def test_a_refused_create_endpoint_is_cleaned_up_and_one_line(world: World) -> None:
    """Driven: moto refuses CreateEndpoint with a ValidationException (not a capacity error)."""
    world.moto.create_endpoint_errors["us-east-2"] = ("ValidationException", "Invalid role")
    with pytest.raises(
        UserError,
        match=r"AWS could not create gemma-4-e2b in us-east-2 \(ValidationException\): Invalid role",
    ):
        sm.deploy(_spec(world), poll_s=POLL)
    assert Ledger().active() == [] and not world.moto.backend("us-east-2")._models
    [archived] = Ledger().history()
    assert [(r.kind, r.state) for r in archived.resources] == [
        ("model", "deleted"),
        ("endpoint-config", "deleted"),
        ("endpoint", "absent"),
    ]


def test_list_shows_a_ledger_only_row_for_an_interrupted_deploy(world: World) -> None:
    """A deploy interrupted between two creates: its record alone says what may remain."""
    record = sm.LedgerRecord(
        name="half-done", region="us-east-2", model_id="m", instance_types=["ml.g6.xlarge"],
        count=1, image="i", spec={},
    )  # fmt: skip
    record.mark(
        "model",
        "half-done-20260925183600",
        "created",
        "arn:aws:sagemaker:us-east-2:123456789012:model/x",
    )
    record.mark("endpoint-config", "half-done-20260925183600", "requested")
    Ledger().save(record)
    [info] = sm.list_endpoints(["us-east-2"]).endpoints
    assert info.name == "half-done" and info.status is None and info.recorded
    assert info.leftovers == [
        "endpoint-config half-done-20260925183600 (requested)",
        "model half-done-20260925183600 (created)",
    ]
    report = sm.delete("half-done", "us-east-2", poll_s=POLL)
    assert [(s.kind, s.outcome) for s in report.steps] == [
        ("endpoint", "not found"),
        ("endpoint-config", "not found"),
        ("model", "not found"),
    ]
    assert Ledger().active() == []


def test_delete_never_touches_what_is_not_tagged_as_ours(world: World) -> None:
    client = boto3.client("sagemaker", region_name="us-east-2")
    client.create_model(
        ModelName="theirs", ExecutionRoleArn=world.role, PrimaryContainer={"Image": "x"}
    )
    client.create_endpoint_config(
        EndpointConfigName="theirs",
        ProductionVariants=[
            {
                "VariantName": "v",
                "ModelName": "theirs",
                "InstanceType": "ml.m5.large",
                "InitialInstanceCount": 1,
            }
        ],
    )
    client.create_endpoint(EndpointName="theirs", EndpointConfigName="theirs")
    with pytest.raises(UserError, match="not tagged as sagemeter's: not touching it"):
        sm.delete("theirs", "us-east-2", poll_s=POLL)
    assert "theirs" in world.moto.backend("us-east-2").endpoints
    with pytest.raises(UserError, match="nothing to delete"):
        sm.delete("never-made", "us-east-2", poll_s=POLL)


def test_delete_all_mine_removes_recorded_and_orphaned_endpoints(world: World) -> None:
    sm.deploy(_spec(world), poll_s=POLL)
    _foreign_sagemeter_endpoint(world, "made-elsewhere")
    reports = sm.delete_all_mine(["us-east-2"], poll_s=POLL)
    assert sorted(r.name for r in reports) == ["gemma-4-e2b", "made-elsewhere"]
    assert all(r.error is None and r.deleted_anything for r in reports)
    backend = world.moto.backend("us-east-2")
    assert not backend.endpoints and not backend.endpoint_configs and not backend._models


def _write_log(name: str, stream: str, lines: list[str], when: datetime) -> None:
    logs = boto3.client("logs", region_name="us-east-2")
    group = f"/aws/sagemaker/Endpoints/{name}"
    with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
        logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName=stream)
    base = int(when.timestamp() * 1000)
    logs.put_log_events(
        logGroupName=group,
        logStreamName=stream,
        logEvents=[{"timestamp": base + i, "message": line} for i, line in enumerate(lines)],
    )


def _reference_lines() -> list[str]:
    text = reference_file("README.md").read_text()
    return [line.strip() for line in text.splitlines() if line.startswith("    ") and line.strip()]


def test_missing_log_group_is_no_logs_yet_not_an_error(world: World) -> None:
    result = sm.recent_logs("gemma-4-e2b", "us-east-2")
    assert not result.exists and result.lines == []
    assert result.group == "/aws/sagemaker/Endpoints/gemma-4-e2b"
    assert sm.startup_facts("gemma-4-e2b", "us-east-2") is None


def test_startup_facts_come_from_the_current_containers_log(world: World) -> None:
    bf16, qat = _reference_lines()[:3], _reference_lines()[3:]
    assert bf16[0].startswith("Model loading took 9.75 GiB")
    now = datetime.now(UTC)
    # An earlier deployment of the same name wrote the QAT lines a day ago …
    _write_log(
        "gemma-4-e2b",
        "AllTraffic/i-0old",
        [f"INFO 09-24 [loader.py:1] {line}" for line in qat],
        now - timedelta(days=1),
    )
    sm.deploy(_spec(world), poll_s=POLL)
    # … and the current container writes the bf16 lines after its creation.
    _write_log(
        "gemma-4-e2b",
        "AllTraffic/i-0new",
        [f"INFO 09-25 [gpu_model_runner.py:2] {line}" for line in bf16],
        now + timedelta(seconds=5),
    )
    facts = sm.startup_facts("gemma-4-e2b", "us-east-2")
    assert facts is not None
    assert (facts.weights_gib, facts.load_seconds, facts.kv_cache_tokens) == (
        9.75,
        82.751806,
        723484,
    )
    assert (facts.max_concurrency, facts.max_concurrency_tokens_per_request) == (88.32, 8192)
    assert (
        facts.quantization is None
        and "CloudWatch /aws/sagemaker/Endpoints/gemma-4-e2b" in facts.source
    )

    everything = sm.startup_facts("gemma-4-e2b", "us-east-2", since=now - timedelta(days=2))
    assert everything is not None and everything.kv_cache_tokens == 723484  # the newest wins


def test_startup_facts_of_the_qat_checkpoint(world: World) -> None:
    _write_log("gemma-4-e2b-qat", "AllTraffic/i-0", _reference_lines()[3:], datetime.now(UTC))
    facts = sm.startup_facts(
        "gemma-4-e2b-qat", "us-east-2", since=datetime.now(UTC) - timedelta(hours=1)
    )
    assert facts is not None
    assert (facts.weights_gib, facts.kv_cache_tokens, facts.quantization) == (
        8.01,
        867999,
        "compressed-tensors",
    )


def test_startup_facts_never_raise_when_the_log_cannot_be_read(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH_LOGS", "http://127.0.0.1:9")  # nothing listens
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    facts = sm.startup_facts("gemma-4-e2b", "us-east-2")
    assert facts is not None and facts.source.startswith(
        "unavailable: cannot reach AWS in us-east-2"
    )
    assert facts.weights_gib is None


def test_logs_are_the_current_deployments_even_when_aws_last_event_times_lag(
    world: World,
) -> None:
    """Driven: moto's lastEventTimestamp made lazy, as AWS's is (updated up to an hour late).
    A-B-A: the name's first container wrote lines; the endpoint was deleted and deployed again;
    the new container's stream shows no lastEventTimestamp yet, the old one does. The lines and
    the progress line must be the new container's."""
    world.moto.lazy_log_times = True
    _write_log(
        "gemma-4-e2b",
        "AllTraffic/i-0first",
        ["first container: Model loading took 8.01 GiB memory"],
        datetime.now(UTC) - timedelta(minutes=30),
    )
    world.moto.settle_log_times("us-east-2")  # the old stream's last event time is known
    sm.deploy(_spec(world), poll_s=POLL)
    _write_log(
        "gemma-4-e2b",
        "AllTraffic/i-0again",
        ["second container: Model loading took 9.75 GiB memory", "second container: ready"],
        datetime.now(UTC) + timedelta(seconds=2),
    )
    result = sm.recent_logs("gemma-4-e2b", "us-east-2")
    assert [line.message for line in result.lines] == [
        "second container: Model loading took 9.75 GiB memory",
        "second container: ready",
    ]
    assert {line.stream for line in result.lines} == {"AllTraffic/i-0again"}
    from sagemeter.sagemaker.endpoint import describe_endpoint
    from sagemeter.sagemaker.logs import newest_log_line

    aws = sm.Aws()
    created = (describe_endpoint(aws, "gemma-4-e2b", "us-east-2") or {})["CreationTime"]
    line = newest_log_line("gemma-4-e2b", "us-east-2", aws, since=created)
    assert line == "second container: ready"

    # Deleted: its log still reads as the last deployment's, from the local record.
    sm.delete("gemma-4-e2b", "us-east-2", poll_s=POLL)
    after = sm.recent_logs("gemma-4-e2b", "us-east-2")
    assert {line.stream for line in after.lines} == {"AllTraffic/i-0again"}


def test_recent_and_followed_log_lines(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_LOGTOKENLOGTOKEN123456")
    start = datetime.now(UTC) - timedelta(minutes=1)
    _write_log(
        "gemma-4-e2b",
        "AllTraffic/i-0",
        [f"line {i}" for i in range(5)] + ["token=hf_LOGTOKENLOGTOKEN123456"],
        start,
    )
    result = sm.recent_logs("gemma-4-e2b", "us-east-2", limit=3)
    assert result.exists and [line.message for line in result.lines] == [
        "line 3",
        "line 4",
        "token=***",
    ]

    seen: list[str] = []
    began = time.monotonic()
    _write_log("gemma-4-e2b", "AllTraffic/i-1", ["new line"], datetime.now(UTC))
    sm.follow_logs(
        "gemma-4-e2b", "us-east-2", lambda line: seen.append(line.message),
        since_ms=int(start.timestamp() * 1000) + 5, poll_s=0.05,
        should_stop=lambda: "new line" in seen or time.monotonic() - began > 5,
    )  # fmt: skip
    assert seen[-1] == "new line" and "line 0" not in seen


def test_an_endpoint_vanishing_mid_listing_is_skipped_not_a_region_error(
    world: World, sagemaker_proxy: SageMakerProxy
) -> None:
    """Proxy: ListTags of one listed endpoint answers "Could not find endpoint" (deleted after
    ListEndpoints); the others are still listed and the region is not an error."""
    _foreign_sagemeter_endpoint(world, "vanishing")
    _foreign_sagemeter_endpoint(world, "billing")
    sagemaker_proxy.inject("ListTags", not_found("endpoint", "vanishing"))
    inventory = sm.list_endpoints(["us-east-2"], with_prices=False)
    assert inventory.region_errors == {}
    assert [info.name for info in inventory.endpoints] == ["billing"]
