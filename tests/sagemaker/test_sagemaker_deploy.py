"""deploy through real boto3 against moto's server on loopback, moto driven where it lags AWS.

Which is which is said per test: "moto as is" means nothing was steered; "driven" names what the
test made moto do (an endpoint that starts Creating, fails, or refuses to be created).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.config import Config

from sagemeter import sagemaker as sm
from sagemeter.errors import UserError
from sagemeter.sagemaker.image import FALLBACK_TAG
from sagemeter.sagemaker.ledger import Ledger
from sagemeter.sagemaker.spec import ownership_tags
from tests.sagemaker_fakes import ARTICLE_IMAGE_TAG, Injection, image_digest, not_found

if TYPE_CHECKING:
    from tests.sagemaker_fakes import SageMakerProxy, World

ROLE = "arn:aws:iam::123456789012:role/sagemeter-test-role"
ARTICLE_IMAGE = f"763104351884.dkr.ecr.us-east-2.amazonaws.com/vllm:{ARTICLE_IMAGE_TAG}"

POLL = 0.02


def _spec(**extra: Any) -> sm.DeploySpec:
    fields: dict[str, Any] = {
        "name": "gemma-4-e2b",
        "model_id": "google/gemma-4-E2B-it",
        "region": "us-east-2",
        "role_arn": ROLE,
    }
    fields.update(extra)
    return sm.make_spec(**fields)


def _tags(region: str, arn: str) -> dict[str, str]:
    client = boto3.client("sagemaker", region_name=region)
    return {t["Key"]: t["Value"] for t in client.list_tags(ResourceArn=arn)["Tags"]}


def test_happy_path_creates_three_tagged_resources_and_records_them(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto as is (InService at once); the wire parameters are read back from moto."""
    monkeypatch.setenv("HF_TOKEN", "hf_TESTTOKENTESTTOKEN1234")
    seen: list[str] = []
    result = sm.deploy(
        _spec(env={"SM_VLLM_MAX_MODEL_LEN": "8192"}),
        on_progress=lambda p: seen.append(p.phase),
        poll_s=POLL,
    )
    assert result.in_service and result.region == "us-east-2"
    assert (
        result.create_to_inservice_minutes is not None and result.create_to_inservice_minutes >= 0
    )
    assert seen[:4] == [
        "choosing the image",
        "creating model",
        "creating endpoint config",
        "creating endpoint",
    ]
    assert [op for op, _, _ in world.moto.calls] == [
        "create_model",
        "create_endpoint_config",
        "create_endpoint",
    ]

    [model_call] = world.moto.requests("create_model")
    env = model_call["primary_container"]["Environment"]
    assert env == {
        "SM_VLLM_MODEL": "google/gemma-4-E2B-it",
        "SM_VLLM_MAX_MODEL_LEN": "8192",
        "SM_VLLM_GPU_MEMORY_UTILIZATION": "0.9",
        "HF_TOKEN": "hf_TESTTOKENTESTTOKEN1234",
    }
    # The newest pinned tag in the region's registry (by version; a 0.27.1 rebuild was pushed
    # later), which is the image the article ran; and what runs, by digest.
    assert model_call["primary_container"]["Image"] == ARTICLE_IMAGE
    assert (result.image, result.image_source, result.image_note) == (
        ARTICLE_IMAGE,
        "registry",
        None,
    )
    resolved = f"763104351884.dkr.ecr.us-east-2.amazonaws.com/vllm@{image_digest(ARTICLE_IMAGE)}"
    assert result.image_digest == resolved
    listed = [r for r in world.json_fake.requests if r["target"].endswith("DescribeImages")]
    assert {(r["region"], r["service"], r["body"]["registryId"]) for r in listed} == {
        ("us-east-2", "ecr", "763104351884")
    }
    assert any(r["body"].get("nextToken") for r in listed)  # every page was read
    [variant] = world.moto.requests("create_endpoint_config")[0]["production_variants"]
    assert variant["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] >= 900
    assert variant["ModelDataDownloadTimeoutInSeconds"] >= 900

    record = Ledger().get("us-east-2", "gemma-4-e2b")
    assert record is not None and record.active
    assert [(r.kind, r.state) for r in record.resources] == [
        ("model", "created"),
        ("endpoint-config", "created"),
        ("endpoint", "created"),
    ]
    assert record.endpoint_status == "InService" and record.create_to_inservice_minutes is not None
    assert (record.image, record.image_source, record.image_digest) == (
        ARTICLE_IMAGE,
        "registry",
        resolved,
    )
    for resource in record.resources:
        assert (
            resource.arn and _tags("us-east-2", resource.arn)["sagemeter:managed-by"] == "sagemeter"
        )
    # The token went to the container only: not into the record, not into the tags.
    for path in world.ledger_files():
        assert "hf_TESTTOKENTESTTOKEN1234" not in path.read_text()
    assert "hf_TESTTOKENTESTTOKEN1234" not in json.dumps(
        _tags("us-east-2", record.resources[0].arn or "")
    )


def test_each_resource_is_recorded_before_its_create_call_returns(world: World) -> None:
    """Driven: while moto handles each create, the test reads the ledger file from disk."""
    states: list[tuple[str, list[tuple[str, str]]]] = []

    def look(operation: str, region: str, params: dict[str, Any]) -> None:
        record = Ledger().get(region, "gemma-4-e2b")
        assert record is not None, f"no record on disk while {operation} was being served"
        states.append((operation, [(r.kind, r.state) for r in record.resources]))

    world.moto.on_create = look
    sm.deploy(_spec(), poll_s=POLL)
    assert states == [
        ("create_model", [("model", "requested")]),
        ("create_endpoint_config", [("model", "created"), ("endpoint-config", "requested")]),
        (
            "create_endpoint",
            [("model", "created"), ("endpoint-config", "created"), ("endpoint", "requested")],
        ),
    ]


def test_a_name_that_exists_is_refused_before_anything_is_created(world: World) -> None:
    """moto as is: the first deploy succeeds, the second names the clash and creates nothing."""
    sm.deploy(_spec(), poll_s=POLL)
    calls = len(world.moto.calls)
    with pytest.raises(UserError, match=r"already (exists|still recorded)") as caught:
        sm.deploy(_spec(model_id="google/gemma-4-E2B-it-qat-w4a16-ct"), poll_s=POLL)
    assert "sagemeter sagemaker delete gemma-4-e2b@us-east-2" in str(caught.value)
    assert len(world.moto.calls) == calls


def test_a_foreign_endpoint_of_that_name_is_refused(world: World) -> None:
    """moto as is: someone else's endpoint, made with plain boto3, blocks the name."""
    client = boto3.client("sagemaker", region_name="us-east-2")
    client.create_model(ModelName="theirs", ExecutionRoleArn=ROLE, PrimaryContainer={"Image": "x"})
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
    client.create_endpoint(EndpointName="gemma-4-e2b", EndpointConfigName="theirs")
    with pytest.raises(UserError, match="already exists in us-east-2"):
        sm.deploy(_spec(), poll_s=POLL)


def test_failed_endpoint_reports_its_reason_and_is_cleaned_up(world: World) -> None:
    """Driven: new endpoints start Creating; the test fails it with a reason during the wait."""
    world.moto.initial_status = "Creating"
    reason = "The primary container for production variant AllTraffic did not pass the ping health check."
    polls = {"n": 0}

    def progress(p: sm.Progress) -> None:
        if p.phase == "creating" and p.status == "Creating":
            polls["n"] += 1
            if polls["n"] == 2:
                world.moto.set_status("us-east-2", "gemma-4-e2b", "Failed", reason)

    result = sm.deploy(_spec(fallback_regions=["us-east-1"]), on_progress=progress, poll_s=POLL)
    assert result.status == "Failed" and result.failure_reason == reason
    assert [a.outcome for a in result.attempts] == ["Failed"]  # not capacity: no other region tried
    [cleanup] = result.cleanups
    assert [(s.kind, s.outcome) for s in cleanup.steps] == [
        ("endpoint", "deleted"),
        ("endpoint-config", "deleted"),
        ("model", "deleted"),
    ]
    backend = world.moto.backend("us-east-2")
    assert not backend.endpoints and not backend.endpoint_configs and not backend._models
    assert Ledger().get("us-east-2", "gemma-4-e2b") is None  # archived: the name is free again
    [archived] = Ledger().history()
    assert archived.failure_reason == reason and not archived.active


def test_capacity_failure_after_the_wait_falls_back_to_the_next_region(world: World) -> None:
    """Driven: us-east-1 fails with InsufficientInstanceCapacity after Creating; us-east-2 works."""
    world.moto.initial_status = "Creating"
    reason = "Unable to provision requested ML compute capacity due to InsufficientInstanceCapacity error."

    def progress(p: sm.Progress) -> None:
        if p.phase == "creating" and p.status == "Creating":
            if p.region == "us-east-1":
                world.moto.set_status("us-east-1", "gemma-4-e2b", "Failed", reason)
            else:
                world.moto.set_status(p.region, "gemma-4-e2b", "InService")

    result = sm.deploy(
        _spec(region="us-east-1", fallback_regions=["us-east-2"]), on_progress=progress, poll_s=POLL
    )
    assert result.in_service and result.region == "us-east-2"
    assert [(a.region, a.outcome) for a in result.attempts] == [
        ("us-east-1", "capacity"),
        ("us-east-2", "InService"),
    ]
    assert result.attempts[0].reason == reason
    # The attempt in us-east-1 was cleaned up, and the result still says so at the end.
    [cleanup] = result.cleanups
    assert cleanup.region == "us-east-1"
    assert [(s.kind, s.outcome) for s in cleanup.steps] == [
        ("endpoint", "deleted"),
        ("endpoint-config", "deleted"),
        ("model", "deleted"),
    ]
    assert (
        not world.moto.backend("us-east-1").endpoints
        and not world.moto.backend("us-east-1")._models
    )
    images = [
        params["primary_container"]["Image"] for params in world.moto.requests("create_model")
    ]
    assert "us-east-1.amazonaws.com" in images[0] and "us-east-2.amazonaws.com" in images[1]
    assert Ledger().get("us-east-1", "gemma-4-e2b") is None
    assert Ledger().get("us-east-2", "gemma-4-e2b") is not None


def test_quota_refusal_at_create_falls_back_and_cleans_model_and_config(world: World) -> None:
    """Driven: moto answers CreateEndpoint with ResourceLimitExceeded in us-east-1."""
    world.moto.create_endpoint_errors["us-east-1"] = (
        "ResourceLimitExceeded",
        "The account-level service limit 'ml.g6.xlarge for endpoint usage' is 1 Instances, with current utilization of 1 Instances",
    )
    result = sm.deploy(_spec(region="us-east-1", fallback_regions=["us-east-2"]), poll_s=POLL)
    assert result.in_service and result.region == "us-east-2"
    assert result.attempts[0].outcome == "capacity" and "ResourceLimitExceeded" in (
        result.attempts[0].reason or ""
    )
    [cleanup] = result.cleanups
    assert cleanup.region == "us-east-1"
    assert [(s.kind, s.outcome) for s in cleanup.steps][1:] == [
        ("endpoint-config", "deleted"),
        ("model", "deleted"),
    ]
    assert (
        not world.moto.backend("us-east-1").endpoint_configs
        and not world.moto.backend("us-east-1")._models
    )


def test_quota_refusal_in_the_last_region_is_one_actionable_line(world: World) -> None:
    """Driven: ResourceLimitExceeded with no region left to try."""
    world.moto.create_endpoint_errors["us-east-2"] = (
        "ResourceLimitExceeded",
        "limit is 1 Instances",
    )
    with pytest.raises(UserError, match="quota exceeded in us-east-2") as caught:
        sm.deploy(_spec(), poll_s=POLL)
    assert "sagemeter sagemaker quota" in str(caught.value)
    assert not world.moto.backend("us-east-2")._models  # cleaned up before the error
    assert Ledger().active() == []


def test_deadline_leaves_a_recorded_creating_endpoint(world: World) -> None:
    """Driven: the endpoint stays Creating past our own deadline."""
    world.moto.initial_status = "Creating"
    result = sm.deploy(_spec(), deadline_s=0.1, poll_s=POLL)
    assert result.timed_out and result.status == "Creating"
    assert "sagemeter sagemaker delete gemma-4-e2b@us-east-2" in (result.note or "")
    record = Ledger().get("us-east-2", "gemma-4-e2b")
    assert record is not None and record.active and record.endpoint_status == "Creating"


def test_ctrl_c_during_the_wait_leaves_a_record_that_list_shows(world: World) -> None:
    """Driven: Creating forever; the progress callback raises KeyboardInterrupt like a Ctrl-C."""
    world.moto.initial_status = "Creating"

    def interrupt(p: sm.Progress) -> None:
        if p.phase == "creating":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sm.deploy(_spec(), on_progress=interrupt, poll_s=POLL)
    record = Ledger().get("us-east-2", "gemma-4-e2b")
    assert record is not None and record.active and "interrupted" in (record.note or "")
    inventory = sm.list_endpoints(["us-east-2"], price_per_hour=1.1267)
    [info] = inventory.endpoints
    assert (info.name, info.status, info.recorded, info.orphan) == (
        "gemma-4-e2b",
        "Creating",
        True,
        False,
    )


def test_delete_waits_out_creating_then_deletes(world: World) -> None:
    """Driven: Creating, which SageMaker (and moto here) refuses to delete; InService later."""
    world.moto.initial_status = "Creating"
    sm.deploy(_spec(), deadline_s=0.05, poll_s=POLL)
    with pytest.raises(UserError, match="cannot delete it until it is InService or Failed"):
        sm.delete("gemma-4-e2b", "us-east-2", no_wait=True, poll_s=POLL)
    assert "gemma-4-e2b" in world.moto.backend("us-east-2").endpoints

    phases: list[str] = []

    def progress(p: sm.Progress) -> None:
        phases.append(p.phase)
        if p.status == "Creating" and phases.count(p.phase) == 3:  # it has waited a while
            world.moto.set_status("us-east-2", "gemma-4-e2b", "InService")

    report = sm.delete("gemma-4-e2b", "us-east-2", on_progress=progress, poll_s=POLL)
    assert any("waiting for Creating to end" in phase for phase in phases)
    assert [(s.kind, s.outcome) for s in report.steps] == [
        ("endpoint", "deleted"),
        ("endpoint-config", "deleted"),
        ("model", "deleted"),
    ]
    assert Ledger().active() == []


# --------------------------------------------------------------------------- eventual consistency


def test_an_endpoint_not_visible_yet_after_create_is_waited_for_not_cleaned_up(
    world: World, sagemaker_proxy: SageMakerProxy
) -> None:
    """Proxy: right after CreateEndpoint, DescribeEndpoint answers "Could not find endpoint"
    twice (SageMaker's reads are eventually consistent), then moto's InService."""

    def lag(operation: str, region: str, params: dict[str, Any]) -> None:
        if operation == "create_endpoint":
            missing = not_found("endpoint", "gemma-4-e2b")
            sagemaker_proxy.inject("DescribeEndpoint", missing, missing)

    world.moto.on_create = lag
    result = sm.deploy(_spec(), poll_s=POLL)
    assert result.in_service, result
    assert result.cleanups == []
    backend = world.moto.backend("us-east-2")
    assert "gemma-4-e2b" in backend.endpoints and backend.endpoint_configs and backend._models
    assert sagemaker_proxy.rules["DescribeEndpoint"] == []  # both "not found" answers were read


def test_a_config_not_visible_yet_is_described_first_and_create_endpoint_resent(
    world: World, sagemaker_proxy: SageMakerProxy
) -> None:
    """Proxy: after CreateEndpointConfig, DescribeEndpointConfig once and CreateEndpoint once
    answer "Could not find endpoint configuration"; then moto's answers."""

    def lag(operation: str, region: str, params: dict[str, Any]) -> None:
        if operation == "create_endpoint_config":
            name = params["endpoint_config_name"]
            sagemaker_proxy.inject(
                "DescribeEndpointConfig", not_found("endpoint configuration", name)
            )
            sagemaker_proxy.inject("CreateEndpoint", not_found("endpoint configuration", name))

    world.moto.on_create = lag
    result = sm.deploy(_spec(), poll_s=POLL)
    assert result.in_service, result
    ops = sagemaker_proxy.operations
    first_create = ops.index("CreateEndpoint")
    assert ops[ops.index("CreateEndpointConfig") + 1 : first_create] == [
        "DescribeEndpointConfig",
        "DescribeEndpointConfig",
    ]
    assert ops.count("CreateEndpoint") == 2
    assert [op for op, _, _ in world.moto.calls].count("create_endpoint") == 1


# --------------------------------------------------------------------------- delete outcomes


def test_a_delete_that_fails_is_one_line_and_keeps_config_model_and_record(world: World) -> None:
    """Driven: moto's DeleteEndpoint leaves the endpoint Failed, as a failed delete does."""
    sm.deploy(_spec(), poll_s=POLL)
    world.moto.delete_outcome = ("Failed", "Internal failure while deleting the endpoint")
    with pytest.raises(UserError, match="deleting endpoint gemma-4-e2b in us-east-2 failed") as e:
        sm.delete("gemma-4-e2b", "us-east-2", poll_s=POLL, deadline_s=2)
    assert "Internal failure while deleting" in str(e.value) and "\n" not in str(e.value)
    backend = world.moto.backend("us-east-2")
    assert backend.endpoints and backend.endpoint_configs and backend._models
    record = Ledger().get("us-east-2", "gemma-4-e2b")
    assert record is not None and record.active
    assert Ledger().history() == []


def test_a_delete_past_the_deadline_is_one_line_and_keeps_the_record(world: World) -> None:
    """Driven: moto's DeleteEndpoint leaves the endpoint Deleting for longer than we wait."""
    sm.deploy(_spec(), poll_s=POLL)
    world.moto.delete_outcome = ("Deleting", None)
    with pytest.raises(UserError, match="still Deleting") as e:
        sm.delete("gemma-4-e2b", "us-east-2", poll_s=POLL, deadline_s=0.1)
    assert "sagemeter sagemaker delete gemma-4-e2b@us-east-2" in str(e.value)
    assert world.moto.backend("us-east-2").endpoint_configs
    record = Ledger().get("us-east-2", "gemma-4-e2b")
    assert record is not None and record.active


# --------------------------------------------------------------------------- name races, retries


def test_cleanup_leaves_a_concurrent_deploys_endpoint_of_the_same_name(world: World) -> None:
    """Driven: while our CreateEndpoint is served, another sagemeter sagemaker deploy creates an endpoint
    of the same name; moto (like SageMaker) then refuses ours as already existing."""
    client = boto3.client("sagemaker", region_name="us-east-2")

    def race(operation: str, region: str, params: dict[str, Any]) -> None:
        if operation != "create_endpoint":
            return
        world.moto.on_create = None
        other = _spec(model_id="google/gemma-4-E2B-it-qat-w4a16-ct")
        tags = ownership_tags(other, "us-east-2", "x", "2026-09-25T18:36:00Z", False)
        client.create_model(
            ModelName="other", ExecutionRoleArn=ROLE, PrimaryContainer={"Image": "x"}, Tags=tags
        )
        client.create_endpoint_config(
            EndpointConfigName="other",
            ProductionVariants=[
                {
                    "VariantName": "AllTraffic",
                    "ModelName": "other",
                    "InstanceType": "ml.g6.xlarge",
                    "InitialInstanceCount": 1,
                }
            ],
            Tags=tags,
        )
        client.create_endpoint(EndpointName="gemma-4-e2b", EndpointConfigName="other", Tags=tags)

    world.moto.on_create = race
    with pytest.raises(UserError, match="already existing endpoint"):
        sm.deploy(_spec(), poll_s=POLL)
    backend = world.moto.backend("us-east-2")
    assert backend.endpoints["gemma-4-e2b"].endpoint_config_name == "other"
    assert list(backend.endpoint_configs) == ["other"] and list(backend._models) == ["other"]
    assert Ledger().active() == []
    [archived] = Ledger().history()
    assert ("endpoint", "absent") in [(r.kind, r.state) for r in archived.resources]


def test_a_create_whose_answer_was_lost_is_not_torn_down_on_the_retry(
    world: World, sagemaker_proxy: SageMakerProxy
) -> None:
    """Proxy: moto creates the model, the proxy answers 500; botocore's retry then meets
    "Cannot create already existing model", which is our own model (same spec, same stamp)."""
    sagemaker_proxy.inject(
        "CreateModel", Injection(500, "InternalFailure", "internal error", forward=True)
    )
    result = sm.deploy(_spec(), poll_s=POLL)
    assert result.in_service, result
    assert [op for op, _, _ in world.moto.calls].count("create_model") == 2
    backend = world.moto.backend("us-east-2")
    assert len(backend._models) == 1
    record = Ledger().get("us-east-2", "gemma-4-e2b")
    assert record is not None
    model = record.resource("model")
    assert model is not None and model.state == "created" and model.arn


def test_a_5xx_after_retries_leaves_the_resource_recorded_and_cleanup_removes_it(
    world: World, sagemaker_proxy: SageMakerProxy
) -> None:
    """Proxy: CreateEndpointConfig takes effect in moto but every answer is a 500 (two attempts:
    the test's client allows two); the config exists, so it must not be recorded as absent."""
    aws = sm.Aws()
    aws.client(
        "sagemaker", "us-east-2", Config(retries={"mode": "standard", "total_max_attempts": 2})
    )
    lost = Injection(500, "InternalFailure", "internal error", forward=True)
    sagemaker_proxy.inject("CreateEndpointConfig", lost, lost)
    with pytest.raises(UserError, match="InternalFailure"):
        sm.deploy(_spec(), poll_s=POLL, aws=aws)
    backend = world.moto.backend("us-east-2")
    assert not backend.endpoint_configs and not backend._models
    assert Ledger().active() == []


def test_a_denied_pass_role_names_iam_pass_role_not_create_model(
    world: World, sagemaker_proxy: SageMakerProxy
) -> None:
    """Proxy: CreateModel is refused because the caller may not pass the role, as AWS words it."""
    denied = (
        "User: arn:aws:sts::123456789012:assumed-role/dev/me is not authorized to perform: "
        f"iam:PassRole on resource: {ROLE} because no identity-based policy allows the "
        "iam:PassRole action"
    )
    sagemaker_proxy.inject("CreateModel", Injection(400, "AccessDeniedException", denied))
    with pytest.raises(UserError, match=r"AWS denied iam:PassRole in us-east-2") as caught:
        sm.deploy(_spec(), poll_s=POLL)
    assert "sagemaker:CreateModel" not in str(caught.value)
    assert "docs/sagemaker.md#iam" in str(caught.value)
    assert not world.moto.backend("us-east-2")._models
    assert Ledger().active() == []


# --------------------------------------------------------------------------- the image


def test_a_registry_that_cannot_be_listed_gives_the_fallback_image_and_says_why(
    world: World,
) -> None:
    """The ECR fake refuses DescribeImages as AWS words an access denial: the deploy goes on
    with the tested fallback image (the article's) and records why."""
    world.json_fake.handlers["AmazonEC2ContainerRegistry_V20150921.DescribeImages"] = lambda b: (
        400,
        {
            "__type": "AccessDeniedException",
            "message": "User: arn:aws:iam::123456789012:user/u is not authorized to perform: "
            "ecr:DescribeImages on resource: arn:aws:ecr:us-east-2:763104351884:repository/vllm",
        },
    )
    result = sm.deploy(_spec(), poll_s=POLL)
    assert result.in_service
    assert result.image.endswith(f"/vllm:{FALLBACK_TAG}") and result.image_source == "fallback"
    assert "AWS denied ecr:DescribeImages in us-east-2" in (result.image_note or "")
    [model_call] = world.moto.requests("create_model")
    assert model_call["primary_container"]["Image"] == result.image


def test_a_pinned_tag_is_sent_as_given_with_its_digest_from_the_registry(world: World) -> None:
    tag = "0.29.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.0"
    result = sm.deploy(_spec(image_tag=tag), poll_s=POLL)
    uri = f"763104351884.dkr.ecr.us-east-2.amazonaws.com/vllm:{tag}"
    assert (result.image, result.image_source) == (uri, "--image-tag")
    assert result.image_digest and result.image_digest.endswith(image_digest(uri))
    [asked] = [r for r in world.json_fake.requests if r["target"].endswith("DescribeImages")]
    assert asked["body"]["imageIds"] == [{"imageTag": tag}]


def test_a_region_with_another_registry_account_is_asked_there(world: World) -> None:
    """eu-south-1's images live in account 692866216735 (the repository's region table)."""
    world.registry.article("eu-south-1", account="692866216735")
    [plan] = sm.plan_deploy(_spec(region="eu-south-1"), aws=sm.Aws())
    assert plan.image == f"692866216735.dkr.ecr.eu-south-1.amazonaws.com/vllm:{ARTICLE_IMAGE_TAG}"
    assert plan.image_source == "registry"


# --------------------------------------------------------------------------- placed type, price


def test_the_price_is_the_placed_instance_types_not_the_first_asked_for(world: World) -> None:
    """Driven: with InstancePools SageMaker placed the second type; moto's DescribeEndpoint
    reports it in the pool summary, as SageMaker's does."""
    world.prices.extend(
        [
            world.price_item("ml.g6.xlarge", "us-east-2", "USE2-Host:ml.g6.xlarge", "Hosting", "1.1267"),
            world.price_item("ml.g6.4xlarge", "us-east-2", "USE2-Host:ml.g6.4xlarge", "Hosting", "1.654"),
        ]
    )  # fmt: skip
    world.moto.placed_types["us-east-2"] = "ml.g6.4xlarge"
    result = sm.deploy(_spec(fallback_instance_types=["ml.g6.4xlarge"]), poll_s=POLL)
    assert result.placed_instance_types == ["ml.g6.4xlarge"]
    assert (result.hourly_usd, result.priced_instance_type) == (1.654, "ml.g6.4xlarge")
    record = Ledger().get("us-east-2", "gemma-4-e2b")
    assert record is not None
    assert (record.hourly_usd, record.priced_instance_type) == (1.654, "ml.g6.4xlarge")
    info = sm.endpoint_status("gemma-4-e2b", "us-east-2")
    assert (info.instance_types, info.hourly_usd) == (["ml.g6.4xlarge"], 1.654)
    [listed] = sm.list_endpoints(["us-east-2"]).endpoints
    assert (listed.hourly_usd, listed.priced_instance_type) == (1.654, "ml.g6.4xlarge")
    described = sm.deployment_info("gemma-4-e2b", "us-east-2")
    assert described["hourly_usd"] == 1.654 and described["instance_types"] == ["ml.g6.4xlarge"]


# --------------------------------------------------------------------------- a new role


def test_create_model_is_resent_while_sagemaker_cannot_assume_a_new_role(
    world: World, sagemaker_proxy: SageMakerProxy
) -> None:
    """Proxy: the first two CreateModel calls are refused as SageMaker refuses a role IAM has
    not yet propagated (nothing is created); the third goes through."""
    refusal = Injection(
        400,
        "ValidationException",
        f"Could not assume role {ROLE}. Please ensure that the role exists and allows principal "
        "'sagemaker.amazonaws.com' to assume the role.",
    )
    sagemaker_proxy.inject("CreateModel", refusal, refusal)
    phases: list[str] = []
    result = sm.deploy(_spec(), poll_s=POLL, on_progress=lambda p: phases.append(p.phase))
    assert result.in_service
    assert sagemaker_proxy.operations.count("CreateModel") == 3
    assert "waiting until SageMaker can assume the execution role" in phases
    assert len(world.moto.backend("us-east-2")._models) == 1


def test_a_role_sagemaker_never_can_assume_is_one_line_after_the_wait(
    world: World, sagemaker_proxy: SageMakerProxy
) -> None:
    refusal = Injection(400, "ValidationException", f"Could not assume role {ROLE}.")
    sagemaker_proxy.inject("CreateModel", *[refusal] * 50)
    with pytest.raises(UserError, match=r"Could not assume role") as caught:
        sm.deploy(_spec(), poll_s=POLL, role_wait_s=0.2)
    assert "\n" not in str(caught.value)
    assert Ledger().active() == [] and not world.moto.backend("us-east-2")._models


def test_a_refusal_in_the_last_region_still_reports_the_earlier_attempts_cleanup(
    world: World,
) -> None:
    """Driven: us-east-1 refuses CreateEndpoint for quota (cleaned up), then us-east-2 too."""
    for region in ("us-east-1", "us-east-2"):
        world.moto.create_endpoint_errors[region] = ("ResourceLimitExceeded", "limit is 1")
    with pytest.raises(UserError, match="quota exceeded in us-east-2") as caught:
        sm.deploy(_spec(region="us-east-1", fallback_regions=["us-east-2"]), poll_s=POLL)
    assert "before that: us-east-1: capacity" in str(caught.value)
    assert "model deleted" in str(caught.value)


def test_a_pinned_tag_the_registry_does_not_have_is_refused_before_anything_is_created(
    world: World,
) -> None:
    with pytest.raises(
        UserError, match=r"--image-tag 0\.99\.0-nope: no such tag in 763104351884/vllm"
    ):
        sm.deploy(_spec(image_tag="0.99.0-nope"), poll_s=POLL)
    assert world.moto.calls == [] and Ledger().active() == []


def test_a_name_still_running_in_another_region_is_refused(world: World) -> None:
    """A-B-A after a fallback: the first A still runs in us-east-1; deploying the name again in
    us-east-2 alone would make two endpoints bill."""
    sm.deploy(_spec(region="us-east-1"), poll_s=POLL)
    calls = len(world.moto.calls)
    with pytest.raises(UserError, match=r"still deployed in us-east-1 \(recorded\): delete it"):
        sm.deploy(_spec(), poll_s=POLL)
    assert len(world.moto.calls) == calls
