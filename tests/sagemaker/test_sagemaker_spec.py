"""The three create requests, checked against botocore's own SageMaker service model.

No network: `plan_deploy` builds exactly what `deploy` sends, and botocore's ParamValidator (the
check boto3 runs before sending) must find nothing wrong with any of it.
"""

from __future__ import annotations

import json

import botocore.session
import pytest
from botocore.validate import ParamValidator

from sagemeter.errors import UserError
from sagemeter.sagemaker import image, make_spec, plan_deploy
from sagemeter.sagemaker.deploy import is_capacity_failure
from sagemeter.sagemaker.redact import MASK, redact
from sagemeter.sagemaker.spec import spec_from_tags

ROLE = "arn:aws:iam::123456789012:role/sagemeter-test-role"
MODEL = botocore.session.get_session().get_service_model("sagemaker")


def _validate(operation: str, params: dict[str, object]) -> None:
    report = ParamValidator().validate(params, MODEL.operation_model(operation).input_shape)
    assert not report.has_errors(), report.generate_report()


def _spec(**extra: object):  # type: ignore[no-untyped-def]
    fields = {
        "name": "gemma-4-e2b",
        "model_id": "google/gemma-4-E2B-it",
        "region": "us-east-2",
        "role_arn": ROLE,
    }
    fields.update(extra)
    return make_spec(**fields)


def test_single_type_requests_are_valid_and_carry_the_issue_fields() -> None:
    [plan] = plan_deploy(_spec(), hf_token="")
    for operation, params in plan.requests.items():
        _validate(operation, params)
    variant = plan.requests["CreateEndpointConfig"]["ProductionVariants"][0]
    assert variant["InstanceType"] == "ml.g6.xlarge"
    assert "InstancePools" not in variant
    assert variant["InitialInstanceCount"] == 1
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] >= 900
    assert variant["ModelDataDownloadTimeoutInSeconds"] >= 900
    # The default image is CUDA 13: it needs the driver-580 AMI, which this botocore knows.
    assert variant["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"
    amis = MODEL.shape_for("ProductionVariantInferenceAmiVersion").enum  # type: ignore[attr-defined]
    assert variant["InferenceAmiVersion"] in amis
    container = plan.requests["CreateModel"]["PrimaryContainer"]
    # Without AWS the registry is not asked: the fallback is the article's own image, and the
    # plan says why it was chosen.
    assert container["Image"] == (
        "763104351884.dkr.ecr.us-east-2.amazonaws.com/vllm:"
        "0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.1"
    )
    assert plan.image_source == "fallback" and "registry was not asked" in (plan.image_note or "")
    # The article's repository sent both settings with every deploy.
    assert container["Environment"] == {
        "SM_VLLM_MODEL": "google/gemma-4-E2B-it",
        "SM_VLLM_MAX_MODEL_LEN": "8192",
        "SM_VLLM_GPU_MEMORY_UTILIZATION": "0.9",
    }
    assert plan.requests["CreateEndpoint"]["EndpointName"] == "gemma-4-e2b"
    config_name = plan.requests["CreateEndpointConfig"]["EndpointConfigName"]
    assert plan.requests["CreateEndpoint"]["EndpointConfigName"] == config_name
    assert variant["ModelName"] == plan.requests["CreateModel"]["ModelName"]
    assert config_name.startswith("gemma-4-e2b-") and len(config_name) <= 63


def test_fallback_types_become_instance_pools_in_priority_order() -> None:
    spec = _spec(fallback_instance_types=["ml.g5.xlarge", "ml.g6e.xlarge"])
    [plan] = plan_deploy(spec, hf_token="")
    _validate("CreateEndpointConfig", plan.requests["CreateEndpointConfig"])
    variant = plan.requests["CreateEndpointConfig"]["ProductionVariants"][0]
    assert "InstanceType" not in variant  # InstancePools replaces it
    assert variant["InstancePools"] == [
        {"InstanceType": "ml.g6.xlarge", "Priority": 1},
        {"InstanceType": "ml.g5.xlarge", "Priority": 2},
        {"InstanceType": "ml.g6e.xlarge", "Priority": 3},
    ]
    assert "InstancePools" in MODEL.shape_for("ProductionVariant").members  # type: ignore[attr-defined]


def test_every_resource_is_tagged_as_ours_with_the_spec() -> None:
    spec = _spec(env={"SM_VLLM_MAX_MODEL_LEN": "8192", "MY_API_KEY": "abcdef123456"})
    [plan] = plan_deploy(spec, hf_token="hf_abcdefghijklmnopqrstuvwxyz")
    tag_sets = [
        plan.requests[op]["Tags"]
        for op in ("CreateModel", "CreateEndpointConfig", "CreateEndpoint")
    ]
    assert tag_sets[0] == tag_sets[1] == tag_sets[2]
    tags = {t["Key"]: t["Value"] for t in tag_sets[0]}
    assert tags["sagemeter:managed-by"] == "sagemeter"
    assert tags["sagemeter:model-id"] == "google/gemma-4-E2B-it"
    assert tags["sagemeter:instance-types"] == "ml.g6.xlarge"
    assert tags["sagemeter:hf-token"] == "set"
    pattern = MODEL.shape_for("TagValue").metadata["pattern"]  # type: ignore[attr-defined]
    assert pattern == "([\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*)"
    assert all(
        len(v) <= 256 and all(c.isalnum() or c in " _.:/=+-@" for c in v) for v in tags.values()
    )
    recorded = spec_from_tags(tag_sets[0])
    assert recorded is not None
    assert recorded["model_id"] == "google/gemma-4-E2B-it"
    assert recorded["env"] == {"SM_VLLM_MAX_MODEL_LEN": "8192", "MY_API_KEY": MASK}
    text = json.dumps(plan.model_dump())
    assert "hf_abcdefghijklmnopqrstuvwxyz" not in text and "abcdef123456" not in text
    assert plan.requests["CreateModel"]["PrimaryContainer"]["Environment"]["HF_TOKEN"] == MASK


def test_every_cuda_12_image_gets_the_driver_550_ami_every_cuda_13_one_the_580_one() -> None:
    """The Deep Learning Containers repository pairs AMIs by CUDA major version (its
    test/test_utils/constants.py): every 12.x container on gpu-3-1 (driver 550), every 13.x one on
    gpu-4-1 (driver 580); it shows a CUDA 12.8 image on another AMI failing with a zero-log
    CannotStartContainerError. vLLM 0.13-0.19.1 are cu129, 0.20 and later cu130. An image whose
    tag names no CUDA gets gpu-4-1, the repository's default. Both AMIs are in botocore's enum."""
    known = set(MODEL.shape_for("ProductionVariantInferenceAmiVersion").enum)  # type: ignore[attr-defined]
    for tag, ami in [
        ("0.8.5-gpu-py312-cu124-ubuntu22.04-sagemaker", "al2-ami-sagemaker-inference-gpu-3-1"),
        ("0.10.2-gpu-py312-cu121-ubuntu22.04-sagemaker", "al2-ami-sagemaker-inference-gpu-3-1"),
        ("0.11.0-gpu-py312-cu128-ubuntu22.04-sagemaker", "al2-ami-sagemaker-inference-gpu-3-1"),
        ("0.14.0-gpu-py312-cu129-ubuntu22.04-sagemaker", "al2-ami-sagemaker-inference-gpu-3-1"),
        ("0.19.1-gpu-py312-cu129-ubuntu22.04-sagemaker", "al2-ami-sagemaker-inference-gpu-3-1"),
        ("0.20.0-gpu-py312-cu130-ubuntu22.04-sagemaker", "al2023-ami-sagemaker-inference-gpu-4-1"),
        (
            "0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.1",
            "al2023-ami-sagemaker-inference-gpu-4-1",
        ),
    ]:
        [plan] = plan_deploy(_spec(image_tag=tag), hf_token="")
        variant = plan.requests["CreateEndpointConfig"]["ProductionVariants"][0]
        assert variant["InferenceAmiVersion"] == ami, tag
        assert ami in known
    [plan] = plan_deploy(_spec(image="123456789012.dkr.ecr.us-east-2.amazonaws.com/mine:latest"))
    variant = plan.requests["CreateEndpointConfig"]["ProductionVariants"][0]
    assert variant["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"
    [plan] = plan_deploy(_spec(instance_type="ml.m5.xlarge"), hf_token="")
    assert (
        "InferenceAmiVersion" not in plan.requests["CreateEndpointConfig"]["ProductionVariants"][0]
    )


def test_fallback_regions_get_their_own_image_account() -> None:
    plans = plan_deploy(
        _spec(fallback_regions=["us-east-1", "eu-south-1", "cn-north-1"]), hf_token=""
    )
    images = [p.image for p in plans]
    assert images[0].startswith("763104351884.dkr.ecr.us-east-2.amazonaws.com/vllm:")
    assert images[1].startswith("763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:")
    assert images[2].startswith("692866216735.dkr.ecr.eu-south-1.amazonaws.com/vllm:")
    assert images[3].startswith("727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/vllm:")
    # me-west-1 is neither in the repository's region table nor a region botocore knows.
    assert "me-west-1" not in botocore.session.get_session().get_available_regions("sagemaker")
    for unknown in ("me-west-1", "us-gov-west-1"):
        with pytest.raises(UserError, match="pass --image"):
            image.vllm_image_uri(unknown)


def test_the_image_table_names_only_regions_botocore_knows() -> None:
    session = botocore.session.get_session()
    known = set(session.get_available_regions("sagemaker"))
    known |= set(session.get_available_regions("sagemaker", "aws-cn"))
    assert set(image.DLC_ACCOUNTS) <= known, set(image.DLC_ACCOUNTS) - known


def test_the_newest_pinned_tag_is_chosen_by_version_not_push_date_or_name() -> None:
    tags = [
        "0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker-v1.3",  # a patch rebuild, pushed last
        "0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.1",
        "0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.0",
        "0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker",  # floating: not pinned
        "0.31-gpu-py312-cu130-ubuntu24.04-sagemaker-v1",  # floating
        "0.9.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v9.9",  # 0.9 < 0.30 by version, not text
        "0.31.0-gpu-py312",  # not a SageMaker tag
    ]
    assert image.newest_pinned(tags) == "0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.1"
    later = "0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.10"
    assert image.newest_pinned([*tags, later]) == later
    assert image.newest_pinned(["0.30.0-gpu-py312"]) is None
    # The fallback is itself a pinned tag, of a release the repository lists as CUDA 13.
    assert image.PINNED_TAG.match(image.FALLBACK_TAG)
    assert image.cuda_of(image.FALLBACK_TAG) == (13, 0)


def test_the_article_settings_are_the_defaults_and_each_can_be_changed_or_left_to_vllm() -> None:
    [plan] = plan_deploy(_spec(max_model_len=4096, gpu_memory_utilization=0.85), hf_token="")
    env = plan.requests["CreateModel"]["PrimaryContainer"]["Environment"]
    assert (env["SM_VLLM_MAX_MODEL_LEN"], env["SM_VLLM_GPU_MEMORY_UTILIZATION"]) == (
        "4096",
        "0.85",
    )
    [plan] = plan_deploy(_spec(max_model_len=None, gpu_memory_utilization=None), hf_token="")
    assert plan.requests["CreateModel"]["PrimaryContainer"]["Environment"] == {
        "SM_VLLM_MODEL": "google/gemma-4-E2B-it"
    }
    same = _spec(env={"SM_VLLM_MAX_MODEL_LEN": "8192"})  # the same value twice is no conflict
    assert same.max_model_len == 8192


def test_provision_timeout_is_sent_only_when_asked() -> None:
    [plan] = plan_deploy(_spec(provision_timeout_s=600), hf_token="")
    _validate("CreateEndpointConfig", plan.requests["CreateEndpointConfig"])
    assert (
        plan.requests["CreateEndpointConfig"]["ProductionVariants"][0][
            "VariantInstanceProvisionTimeoutInSeconds"
        ]
        == 600
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "-bad"}, "not a valid endpoint name"),
        ({"instance_type": "ml.g99.xlarge"}, "not a SageMaker real-time instance type"),
        ({"role_arn": "my-role"}, "not an IAM role ARN"),
        ({"startup_timeout_s": 10}, "greater than or equal to 60"),
        ({"fallback_instance_types": ["ml.g6.xlarge"]}, "only once"),
        ({"inference_ami_version": "al2-nope"}, "InferenceAmiVersion"),
        ({"env": {"bad key": "x"}}, "must match"),
        ({"env": {"SM_VLLM_MODEL": "other/model"}}, "disagrees with --model"),
        (
            {"env": {"SM_VLLM_MAX_MODEL_LEN": "4096"}},
            "SM_VLLM_MAX_MODEL_LEN=4096 disagrees with --max-model-len",
        ),
        ({"gpu_memory_utilization": 1.5}, "less than or equal to 1"),
        ({"image": "x/y:z", "image_tag": "t"}, "--image or --image-tag, not both"),
        (
            {
                "fallback_instance_types": [
                    "ml.g5.xlarge",
                    "ml.g5.2xlarge",
                    "ml.g5.4xlarge",
                    "ml.g5.8xlarge",
                    "ml.g5.12xlarge",
                ]
            },
            "at most 5",
        ),
    ],
)
def test_bad_specs_are_one_clear_line(fields: dict[str, object], message: str) -> None:
    with pytest.raises(UserError, match=message) as caught:
        _spec(**fields)
    assert "\n" not in str(caught.value)


def test_capacity_reasons_are_recognised() -> None:
    assert is_capacity_failure(
        "Unable to provision requested ML compute capacity due to InsufficientInstanceCapacity error."
    )
    assert is_capacity_failure("CapacityError: Unable to provision requested ML compute capacity.")
    assert not is_capacity_failure(
        "The primary container for production variant AllTraffic did not pass the ping health check."
    )
    assert not is_capacity_failure(None)


def test_redact_masks_tokens_and_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_SECRETSECRETSECRET1234")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    text = "token hf_SECRETSECRETSECRET1234 key AKIAIOSFODNN7EXAMPLE secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    cleaned = redact(text)
    assert (
        "SECRET" not in cleaned and "AKIAIOSFODNN7EXAMPLE" not in cleaned and "wJalr" not in cleaned
    )
    assert cleaned.count(MASK) == 3


SECRETS = {
    "WANDB_API_KEY": "wandb-value-123456",
    "MY_SECRET": "secret-value-123456",
    "DB_PASSWORD": "password-value-123456",
    "GH_TOKEN": "token-value-123456",
    "SM_VLLM_API_KEY": "vllm-key-value-123456",
    "KEY": "bare-key-value-123456",
}
# The article's repository's container variables, and vLLM settings whose names merely contain
# TOKEN or KEY: settings, shown as they are.
SETTINGS = {
    "SM_VLLM_SERVED_MODEL_NAME": "google/gemma-4-E2B-it",
    "SM_VLLM_TENSOR_PARALLEL_SIZE": "1",
    "SM_VLLM_MAX_NUM_SEQS": "4",
    "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "8192",
    "SM_VLLM_TOKENIZER": "google/gemma-4-E2B-it",
    "SM_VLLM_TOKENIZER_MODE": "auto",
    "SM_VLLM_KV_CACHE_DTYPE": "auto",
    "SM_VLLM_KEYS_TO_SKIP": "none",
}


def test_secrets_are_masked_by_the_last_word_of_their_name_and_settings_shown_as_they_are() -> None:
    """A key is secret when it is a known secret variable or its last word is KEY, SECRET,
    PASSWORD or TOKEN; the container still gets every value (AWS itself, not our output)."""
    spec = _spec(env=SECRETS | SETTINGS)
    [plan] = plan_deploy(spec, hf_token="hf_abcdefghijklmnopqrstuvwxyz")
    shown = json.dumps([plan.model_dump(), spec.recordable()])
    environment = plan.requests["CreateModel"]["PrimaryContainer"]["Environment"]
    for key, value in SECRETS.items():
        assert value not in shown, key
        assert spec.recordable()["env"][key] == MASK and environment[key] == MASK
    assert environment["HF_TOKEN"] == MASK
    article = {
        "SM_VLLM_MODEL": "google/gemma-4-E2B-it",
        "SM_VLLM_MAX_MODEL_LEN": "8192",
        "SM_VLLM_GPU_MEMORY_UTILIZATION": "0.9",
    }
    for key, value in (article | SETTINGS).items():
        assert environment[key] == value, key
    recorded = spec_from_tags(plan.requests["CreateModel"]["Tags"])
    assert recorded is not None and recorded["env"]["WANDB_API_KEY"] == MASK
    assert recorded["env"]["SM_VLLM_MAX_NUM_BATCHED_TOKENS"] == "8192"
    assert recorded["env"]["SM_VLLM_TOKENIZER"] == "google/gemma-4-E2B-it"


def test_a_spec_too_large_for_the_50_tags_is_one_clear_line() -> None:
    """11 fixed tags plus one per 256 base64 characters of the spec: ~30 long --env entries
    would make CreateModel fail TagList's limit of 50 (botocore's model)."""
    assert MODEL.shape_for("TagList").metadata["max"] == 50
    env = {f"SM_VLLM_OPTION_{i}": "x" * 300 for i in range(30)}
    with pytest.raises(UserError, match=r"needs \d+ tags .* allows 50") as caught:
        _spec(env=env)
    assert "\n" not in str(caught.value) and "--env" in str(caught.value)
    [plan] = plan_deploy(_spec(env=dict(list(env.items())[:5])), hf_token="")
    assert len(plan.requests["CreateModel"]["Tags"]) <= 50
    _validate("CreateModel", plan.requests["CreateModel"])
