"""What a deployment is, and the exact three create requests it becomes.

The requests are built here and nowhere else, so the tests can check every one of them against
botocore's service model, and `deploy --dry-run` can show them (with secrets masked).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from datetime import datetime
from functools import cache
from typing import Annotated, Any

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from sagemeter import __version__
from sagemeter.bounds import MAX_CONTEXT_TOKENS
from sagemeter.errors import UserError
from sagemeter.sagemaker.image import inference_ami_for, vllm_image_uri
from sagemeter.sagemaker.redact import is_secret_key, redact_env, register_secret
from sagemeter.targets import AWS_REGION_NAME, SAGEMAKER_ENDPOINT_NAME
from sagemeter.transport.aws_session import service_model

DEFAULT_INSTANCE_TYPE = "ml.g6.xlarge"
# The container downloads the checkpoint from Hugging Face and loads it before it answers /ping:
# 82 s of loading alone for the article's 10 GB model, plus the download. 30 minutes of grace.
DEFAULT_STARTUP_TIMEOUT_S = 1800
DEFAULT_DOWNLOAD_TIMEOUT_S = 1800
MIN_TIMEOUT_S = 60
MAX_TIMEOUT_S = 3600
MAX_INSTANCE_POOLS = 5
# The source article's vLLM settings (its repository sent both with every deploy): a context of
# 8,192 tokens, which is what vLLM's "Maximum concurrency for 8,192 tokens" line is computed for,
# and 90 % of the GPU's memory for weights, activations and KV cache.
DEFAULT_MAX_MODEL_LEN = 8192
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
MAX_INSTANCES = 100  # instances of one endpoint
MIN_PROVISION_TIMEOUT_S = 300  # VariantInstanceProvisionTimeoutInSeconds: 300-3600
# Deploy's bounds, written once: the spec below holds them, and so do deploy's settings
# (deploy_fields.py) that `sagemaker deploy`'s options and a plan's [arm.sagemaker] take.
MODEL_ID = Field(min_length=1, max_length=256)
MODEL_LEN = Field(ge=1, le=MAX_CONTEXT_TOKENS)
GPU_SHARE = Field(gt=0, le=1)
INSTANCES = Field(ge=1, le=MAX_INSTANCES)
CONTAINER_TIMEOUT = Field(ge=MIN_TIMEOUT_S, le=MAX_TIMEOUT_S)
PROVISION_TIMEOUT = Field(ge=MIN_PROVISION_TIMEOUT_S, le=MAX_TIMEOUT_S)
MAX_MODEL_LEN_KEY = "SM_VLLM_MAX_MODEL_LEN"
GPU_MEMORY_KEY = "SM_VLLM_GPU_MEMORY_UTILIZATION"
VARIANT_NAME = "AllTraffic"  # the CloudWatch log streams are named after it: AllTraffic/i-…

TAG_PREFIX = "sagemeter:"
OWNER_KEY = "sagemeter:managed-by"
OWNER_VALUE = "sagemeter"
SPEC_DIGEST_KEY = "sagemeter:spec-sha256"
CREATED_KEY = "sagemeter:created"
SPEC_KEY = "sagemeter:spec"  # base64 JSON of the (redacted) spec, split over .0, .1, … tags
_TAG_VALUE_MAX = 256
MAX_TAGS = 50  # botocore's TagList: at most 50 tags per resource
# botocore's Tag value pattern is [\p{L}\p{Z}\p{N}_.:/=+\-@]*; this is its ASCII-safe subset.
_TAG_UNSAFE = re.compile(r"[^A-Za-z0-9 _.:/=+\-@]")

_ENV_KEY = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}$")


@cache
def instance_types_known() -> frozenset[str]:
    """Every real-time instance type this botocore's SageMaker model accepts."""
    return _enum("ProductionVariantInstanceType")


@cache
def inference_amis_known() -> frozenset[str]:
    return _enum("ProductionVariantInferenceAmiVersion")


def _enum(shape: str) -> frozenset[str]:
    model = service_model("sagemaker")
    values: list[str] = getattr(model.shape_for(shape), "enum", [])
    return frozenset(values)


class DeploySpec(BaseModel):
    """Everything that decides what gets created; recorded (redacted) in the tags and the ledger."""

    name: str
    model_id: Annotated[str, MODEL_ID]
    region: str
    role_arn: str
    instance_type: str = DEFAULT_INSTANCE_TYPE
    fallback_instance_types: list[str] = Field(default_factory=list)
    fallback_regions: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    image: str | None = Field(None, description="full image URI; None = the AWS vLLM container")
    image_tag: str | None = Field(
        None, description="tag of the AWS vLLM container; None = the newest pinned one at deploy"
    )
    max_model_len: Annotated[int | None, MODEL_LEN] = Field(
        DEFAULT_MAX_MODEL_LEN, description="SM_VLLM_MAX_MODEL_LEN; None = vLLM's own"
    )
    gpu_memory_utilization: Annotated[float | None, GPU_SHARE] = Field(
        DEFAULT_GPU_MEMORY_UTILIZATION,
        description="SM_VLLM_GPU_MEMORY_UTILIZATION; None = vLLM's own",
    )
    count: Annotated[int, INSTANCES] = 1
    inference_ami_version: str | None = Field(None, description="None = chosen from the image")
    startup_timeout_s: Annotated[int, CONTAINER_TIMEOUT] = DEFAULT_STARTUP_TIMEOUT_S
    download_timeout_s: Annotated[int, CONTAINER_TIMEOUT] = DEFAULT_DOWNLOAD_TIMEOUT_S
    provision_timeout_s: Annotated[int | None, PROVISION_TIMEOUT] = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not SAGEMAKER_ENDPOINT_NAME.match(value):
            raise ValueError(
                f"{value!r} is not a valid endpoint name (1-63 letters, digits, hyphens)"
            )
        return value

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        if not AWS_REGION_NAME.match(value):
            raise ValueError(f"{value!r} is not an AWS region such as us-east-2")
        return value

    @field_validator("fallback_regions")
    @classmethod
    def _regions(cls, values: list[str]) -> list[str]:
        for value in values:
            cls._region(value)
        return values

    @field_validator("role_arn")
    @classmethod
    def _role(cls, value: str) -> str:
        if not _ROLE_ARN.match(value):
            raise ValueError(
                f"{value!r} is not an IAM role ARN (arn:aws:iam::123456789012:role/NAME)"
            )
        return value

    @field_validator("instance_type")
    @classmethod
    def _instance_type(cls, value: str) -> str:
        if value not in instance_types_known():
            raise ValueError(f"{value!r} is not a SageMaker real-time instance type")
        return value

    @field_validator("fallback_instance_types")
    @classmethod
    def _fallback_types(cls, values: list[str]) -> list[str]:
        for value in values:
            cls._instance_type(value)
        return values

    @field_validator("inference_ami_version")
    @classmethod
    def _ami(cls, value: str | None) -> str | None:
        if value is not None and value not in inference_amis_known():
            known = ", ".join(sorted(inference_amis_known()))
            raise ValueError(f"{value!r} is not an InferenceAmiVersion this boto3 knows ({known})")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, values: dict[str, str]) -> dict[str, str]:
        for key, value in values.items():
            if not _ENV_KEY.match(key) or len(key) > 1024:
                raise ValueError(f"environment key {key!r} must match [a-zA-Z_][a-zA-Z0-9_]*")
            if len(value) > 1024:
                raise ValueError(f"environment value of {key} is longer than 1024 characters")
        return values

    @model_validator(mode="after")
    def _consistent(self) -> DeploySpec:
        types = self.instance_types
        if len(types) > MAX_INSTANCE_POOLS:
            raise ValueError(f"at most {MAX_INSTANCE_POOLS} instance types (InstancePools) allowed")
        if len(set(types)) != len(types):
            raise ValueError("each instance type may appear only once")
        regions = self.regions
        if len(set(regions)) != len(regions):
            raise ValueError("each region may appear only once")
        given = self.env.get("SM_VLLM_MODEL")
        if given is not None and given != self.model_id:
            raise ValueError("--env SM_VLLM_MODEL disagrees with --model; give the model once")
        for key, value, option in (
            (MAX_MODEL_LEN_KEY, self.max_model_len, "--max-model-len"),
            (GPU_MEMORY_KEY, self.gpu_memory_utilization, "--gpu-memory-utilization"),
        ):
            given = self.env.get(key)
            if given is not None and given != _env_value(value):
                shown = "not sent" if value is None else _env_value(value)
                raise ValueError(
                    f"--env {key}={given} disagrees with {option} ({shown}); give it once, "
                    f"as {option}"
                )
        if self.image and self.image_tag:
            raise ValueError("give --image or --image-tag, not both")
        if len(self.env) + 4 > 100:
            raise ValueError("at most 96 --env entries fit in a SageMaker container environment")
        return self

    @property
    def instance_types(self) -> list[str]:
        """Priority order: the primary type first, then each fallback type."""
        return [self.instance_type, *self.fallback_instance_types]

    @property
    def regions(self) -> list[str]:
        return [self.region, *self.fallback_regions]

    def ami_for(self, image: str) -> str | None:
        """InferenceAmiVersion for `image`: the one given, else the one its CUDA needs."""
        return self.inference_ami_version or inference_ami_for(image, self.instance_types)

    def recordable(self) -> dict[str, Any]:
        """The spec as it may be printed, tagged and recorded: secret env values masked."""
        data = self.model_dump(mode="json")
        data["env"] = redact_env(self.env)
        return data


def make_spec(**fields: Any) -> DeploySpec:
    """Build a DeploySpec, turning the first validation problem into one UserError line."""
    try:
        spec = DeploySpec(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise UserError(f"deploy {where}: {message}" if where else f"deploy: {message}") from None
    # The count is the same in every region (the image is one tag whatever its length).
    image = spec.image or vllm_image_uri("us-east-1", spec.image_tag or "x")
    count = len(ownership_tags(spec, "us-east-1", image, "2000-01-01T00:00:00Z", True))
    if count > MAX_TAGS:
        raise UserError(
            f"deploy env: this spec needs {count} tags to record itself, and SageMaker allows "
            f"{MAX_TAGS} per resource: shorten or drop some --env entries"
        )
    return spec


class ResourceNames(BaseModel):
    """The endpoint keeps the user's name; model and config get a unique, dated one each deploy."""

    endpoint: str
    endpoint_config: str
    model: str


def resource_names(name: str, when: datetime) -> ResourceNames:
    stamp = when.strftime("%Y%m%d%H%M%S")
    base = name[: 63 - len(stamp) - 1]
    unique = f"{base}-{stamp}"
    return ResourceNames(endpoint=name, endpoint_config=unique, model=unique)


def _env_value(value: float | None) -> str | None:
    """A setting as the container environment spells it: 8192, 0.9 (None: not sent)."""
    return None if value is None else f"{value:g}"


def container_environment(spec: DeploySpec, hf_token: str | None) -> dict[str, str]:
    """SM_VLLM_MODEL, the context length and GPU memory share, the user's --env (each SM_VLLM_X
    becomes vLLM's --x), and HF_TOKEN when given."""
    env = {"SM_VLLM_MODEL": spec.model_id}
    settings: tuple[tuple[str, float | None], ...] = (
        (MAX_MODEL_LEN_KEY, spec.max_model_len),
        (GPU_MEMORY_KEY, spec.gpu_memory_utilization),
    )
    for key, setting in settings:
        if (text := _env_value(setting)) is not None:
            env[key] = text
    env.update(spec.env)
    for key, value in env.items():
        if is_secret_key(key):
            register_secret(value)
    if hf_token and "HF_TOKEN" not in env:
        register_secret(hf_token)
        env["HF_TOKEN"] = hf_token
    return env


def _tag_value(text: str) -> str:
    return _TAG_UNSAFE.sub("_", text)[:_TAG_VALUE_MAX]


def spec_digest(spec: DeploySpec) -> str:
    canonical = json.dumps(spec.recordable(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def ownership_tags(
    spec: DeploySpec, region: str, image: str, created_utc: str, hf_token_set: bool
) -> list[dict[str, str]]:
    """The tags on all three resources: who made them, and the spec that made them."""
    tags = {
        OWNER_KEY: OWNER_VALUE,
        "sagemeter:endpoint": spec.name,
        "sagemeter:region": region,
        "sagemeter:model-id": spec.model_id,
        "sagemeter:instance-types": " ".join(spec.instance_types),
        "sagemeter:count": str(spec.count),
        "sagemeter:image": image,
        CREATED_KEY: created_utc,
        "sagemeter:version": __version__,
        "sagemeter:hf-token": "set" if hf_token_set else "unset",
        SPEC_DIGEST_KEY: spec_digest(spec),
    }
    encoded = base64.b64encode(
        json.dumps(spec.recordable(), sort_keys=True, separators=(",", ":")).encode()
    ).decode()
    chunks = [encoded[i : i + _TAG_VALUE_MAX] for i in range(0, len(encoded), _TAG_VALUE_MAX)]
    for index, chunk in enumerate(chunks):
        tags[f"{SPEC_KEY}.{index}"] = chunk
    return [{"Key": key, "Value": _tag_value(value)} for key, value in tags.items()]


def spec_from_tags(tags: list[dict[str, str]]) -> dict[str, Any] | None:
    """The recorded spec back from a resource's tags, or None when it carries none."""
    parts = sorted(
        (int(t["Key"].rsplit(".", 1)[1]), t["Value"])
        for t in tags
        if t["Key"].startswith(SPEC_KEY + ".") and t["Key"].rsplit(".", 1)[1].isdigit()
    )
    if not parts:
        return None
    try:
        value = json.loads(base64.b64decode("".join(chunk for _, chunk in parts)))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def is_ours(tags: list[dict[str, str]]) -> bool:
    return any(t.get("Key") == OWNER_KEY and t.get("Value") == OWNER_VALUE for t in tags)


def create_model_request(
    spec: DeploySpec,
    image: str,
    names: ResourceNames,
    env: dict[str, str],
    tags: list[dict[str, str]],
) -> dict[str, Any]:
    return {
        "ModelName": names.model,
        "PrimaryContainer": {"Image": image, "Environment": env},
        "ExecutionRoleArn": spec.role_arn,
        "Tags": tags,
    }


def production_variant(spec: DeploySpec, image: str, names: ResourceNames) -> dict[str, Any]:
    """One variant. With fallback instance types, InstancePools replaces InstanceType."""
    variant: dict[str, Any] = {
        "VariantName": VARIANT_NAME,
        "ModelName": names.model,
        "InitialInstanceCount": spec.count,
        "ContainerStartupHealthCheckTimeoutInSeconds": spec.startup_timeout_s,
        "ModelDataDownloadTimeoutInSeconds": spec.download_timeout_s,
    }
    if spec.fallback_instance_types:
        variant["InstancePools"] = [
            {"InstanceType": instance_type, "Priority": priority}
            for priority, instance_type in enumerate(spec.instance_types, start=1)
        ]
    else:
        variant["InstanceType"] = spec.instance_type
    ami = spec.ami_for(image)
    if ami:
        variant["InferenceAmiVersion"] = ami
    if spec.provision_timeout_s is not None:
        variant["VariantInstanceProvisionTimeoutInSeconds"] = spec.provision_timeout_s
    return variant


def create_endpoint_config_request(
    spec: DeploySpec, image: str, names: ResourceNames, tags: list[dict[str, str]]
) -> dict[str, Any]:
    return {
        "EndpointConfigName": names.endpoint_config,
        "ProductionVariants": [production_variant(spec, image, names)],
        "Tags": tags,
    }


def create_endpoint_request(names: ResourceNames, tags: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "EndpointName": names.endpoint,
        "EndpointConfigName": names.endpoint_config,
        "Tags": tags,
    }
