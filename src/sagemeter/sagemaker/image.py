"""Which container runs the model: the AWS vLLM Deep Learning Container for SageMaker, per region.

Sources, all in the AWS Deep Learning Containers repository
(github.com/aws/deep-learning-containers):

- the ECR account per region: `docs/reference/region_availability.md` ("Private ECR account IDs
  by region");
- the releases and their CUDA: `docs/src/data/vllm/*-gpu-sagemaker.yml` (0.13-0.19.1 are
  `cu129`, 0.20 and later `cu130`; 0.28 and later on Ubuntu 24.04);
- the host AMI: `test/test_utils/constants.py`, which pairs every CUDA 12.x container with
  `al2-ami-sagemaker-inference-gpu-3-1` (NVIDIA driver 550) and every CUDA 13.x one with
  `al2023-ami-sagemaker-inference-gpu-4-1` (driver 580), and
  `docs/whisperx/deployment/sagemaker.md`, where a CUDA 12.8 image on another AMI fails with a
  zero-log CannotStartContainerError.

The image itself is found at deploy time, as the source article's repository did: the highest
*pinned* SageMaker tag (`X.Y.Z-gpu-…-sagemaker-vA.B`, compared by version, never by push date:
older lines get patch rebuilds) among the registry's tags in that region. `--image-tag` pins a
tag, `--image` any image; when the registry cannot be listed, `FALLBACK_TAG` is used and the
deploy says why.
"""

from __future__ import annotations

import re
from typing import Literal

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel

from sagemeter.errors import UserError
from sagemeter.sagemaker.aws import Aws, error_code, explain

IMAGE_TABLE_SOURCE = (
    "github.com/aws/deep-learning-containers docs/reference/region_availability.md, "
    "docs/src/data/vllm/ and test/test_utils/constants.py"
)
DEFAULT_ACCOUNT = "763104351884"
REPOSITORY = "vllm"
# The image when the registry cannot be listed: the one the source article ran (vLLM 0.30.0,
# CUDA 13.0, Ubuntu 24.04, SageMaker build v1.1).
FALLBACK_TAG = "0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker-v1.1"
DEFAULT_VLLM_TAG = FALLBACK_TAG  # kept for callers that name the default image

AMI_CUDA12 = "al2-ami-sagemaker-inference-gpu-3-1"
AMI_CUDA13 = "al2023-ami-sagemaker-inference-gpu-4-1"

# Region -> ECR account that serves the Deep Learning Containers there.
DLC_ACCOUNTS: dict[str, str] = {
    "us-east-1": DEFAULT_ACCOUNT,
    "us-east-2": DEFAULT_ACCOUNT,
    "us-west-1": DEFAULT_ACCOUNT,
    "us-west-2": DEFAULT_ACCOUNT,
    "ap-south-1": DEFAULT_ACCOUNT,
    "ap-northeast-1": DEFAULT_ACCOUNT,
    "ap-northeast-2": DEFAULT_ACCOUNT,
    "ap-southeast-1": DEFAULT_ACCOUNT,
    "ap-southeast-2": DEFAULT_ACCOUNT,
    "ca-central-1": DEFAULT_ACCOUNT,
    "eu-central-1": DEFAULT_ACCOUNT,
    "eu-west-1": DEFAULT_ACCOUNT,
    "eu-west-2": DEFAULT_ACCOUNT,
    "eu-west-3": DEFAULT_ACCOUNT,
    "eu-north-1": DEFAULT_ACCOUNT,
    "sa-east-1": DEFAULT_ACCOUNT,
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-east-2": "975050140332",
    "ap-south-2": "772153158452",
    "ap-southeast-3": "907027046896",
    "ap-southeast-4": "457447274322",
    "ap-southeast-5": "550225433462",
    "ap-southeast-6": "633930458069",
    "ap-southeast-7": "590183813437",
    "ap-northeast-3": "364406365360",
    "ca-west-1": "204538143572",
    "eu-south-1": "692866216735",
    "eu-south-2": "503227376785",
    "eu-central-2": "380420809688",
    "il-central-1": "780543022126",
    "mx-central-1": "637423239942",
    "me-south-1": "217643126080",
    "me-central-1": "914824155844",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
}

_GPU_FAMILIES = re.compile(
    r"^ml\.(g4dn|g5|g6|g6e|g7|g7e|p3|p4d|p4de|p5|p5e|p5en|p6-[a-z0-9]+|p6e-[a-z0-9]+)\."
)
_CUDA = re.compile(r"-cu(?P<major>\d{2})(?P<minor>\d)")
_VLLM_VERSION = re.compile(r"/vllm:(?P<version>\d+\.\d+(?:\.\d+)?)")
# A pinned SageMaker release tag: full vLLM version, SageMaker build vA.B (immutable); the
# floating tags (`0.30.0-…-sagemaker`, `0.30-…-sagemaker-v1`) move with each rebuild.
PINNED_TAG = re.compile(
    r"^(?P<version>\d+\.\d+\.\d+)-gpu-(?P<middle>.+)-sagemaker-v(?P<build>\d+\.\d+)$"
)

ImageSource = Literal["--image", "--image-tag", "registry", "fallback"]


class ImageChoice(BaseModel):
    """The image a deploy sends, where it came from, and its digest when the registry said."""

    uri: str
    source: ImageSource
    digest: str | None = None  # sha256:… of the tag, from the registry
    note: str | None = None  # why the fallback was used

    @property
    def pinned_uri(self) -> str | None:
        """`repository@sha256:…`, the image by content, when the digest is known."""
        if not self.digest:
            return None
        return f"{self.uri.rsplit(':', 1)[0]}@{self.digest}"


def image_account(region: str) -> str:
    account = DLC_ACCOUNTS.get(region)
    if account is None:
        raise UserError(
            f"no AWS vLLM container account is known for region {region}: pass --image with the "
            f"full image URI (known regions: {', '.join(sorted(DLC_ACCOUNTS))})"
        )
    return account


def vllm_image_uri(region: str, tag: str = FALLBACK_TAG) -> str:
    """`<account>.dkr.ecr.<region>.amazonaws.com/vllm:<tag>` for `region`, from the table above."""
    account = image_account(region)
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{account}.dkr.ecr.{region}.{domain}/{REPOSITORY}:{tag}"


def _pinned_key(tag: str) -> tuple[tuple[int, ...], tuple[int, ...], str] | None:
    match = PINNED_TAG.match(tag)
    if match is None:
        return None
    version = tuple(int(part) for part in match["version"].split("."))
    build = tuple(int(part) for part in match["build"].split("."))
    return version, build, tag


def newest_pinned(tags: list[str]) -> str | None:
    """The highest pinned SageMaker tag by (vLLM version, build), or None when there is none."""
    keys = [key for tag in tags if (key := _pinned_key(tag)) is not None]
    return max(keys)[2] if keys else None


def _registry_tags(aws: Aws, region: str) -> dict[str, str]:
    """Every tag of the region's vLLM repository with its digest (DescribeImages, paged)."""
    tags: dict[str, str] = {}
    paginator = aws.ecr(region).get_paginator("describe_images")
    pages = paginator.paginate(
        registryId=image_account(region),
        repositoryName=REPOSITORY,
        filter={"tagStatus": "TAGGED"},
    )
    for page in pages:
        for detail in page.get("imageDetails", []):
            for tag in detail.get("imageTags", []) or []:
                tags[tag] = str(detail.get("imageDigest") or "")
    return tags


def _tag_digest(aws: Aws, region: str, tag: str) -> str | None:
    """The digest of one tag (None when the registry cannot say); a tag the registry says it
    does not have is refused now, before anything is created."""
    try:
        answer = aws.ecr(region).describe_images(
            registryId=image_account(region),
            repositoryName=REPOSITORY,
            imageIds=[{"imageTag": tag}],
        )
    except ClientError as exc:
        if error_code(exc) == "ImageNotFoundException":
            raise UserError(
                f"--image-tag {tag}: no such tag in {image_account(region)}/{REPOSITORY} in "
                f"{region} (the pinned SageMaker tags look like {FALLBACK_TAG})"
            ) from None
        return None
    except BotoCoreError:
        return None
    details = answer.get("imageDetails", [])
    return str(details[0].get("imageDigest")) if details and details[0].get("imageDigest") else None


def choose_image(
    region: str, *, image: str | None = None, image_tag: str | None = None, aws: Aws | None = None
) -> ImageChoice:
    """The image for `region`: `image` as given, `image_tag` pinned, else the newest pinned tag
    in the registry; without `aws` (a dry run offline), or when the registry cannot be listed,
    the fallback tag with the reason in `note`."""
    if image:
        return ImageChoice(uri=image, source="--image")
    if image_tag:
        digest = _tag_digest(aws, region, image_tag) if aws else None
        return ImageChoice(
            uri=vllm_image_uri(region, image_tag), source="--image-tag", digest=digest
        )
    image_account(region)  # an unknown region is a clear error before any call
    if aws is None:
        return ImageChoice(
            uri=vllm_image_uri(region),
            source="fallback",
            note="the registry was not asked (no AWS session)",
        )
    try:
        tags = _registry_tags(aws, region)
    except (ClientError, BotoCoreError) as exc:
        why = str(explain(exc, f"list the {REPOSITORY} image tags", region, "ecr"))
        return ImageChoice(uri=vllm_image_uri(region), source="fallback", note=why)
    newest = newest_pinned(list(tags))
    if newest is None:
        return ImageChoice(
            uri=vllm_image_uri(region),
            source="fallback",
            note=f"no pinned SageMaker tag in {image_account(region)}/{REPOSITORY} in {region}",
        )
    return ImageChoice(
        uri=vllm_image_uri(region, newest), source="registry", digest=tags[newest] or None
    )


def is_gpu_instance(instance_type: str) -> bool:
    return bool(_GPU_FAMILIES.match(instance_type))


def cuda_of(image: str) -> tuple[int, int] | None:
    """(major, minor) of the CUDA an image's tag names (`-cu130` -> (13, 0)), or None."""
    match = _CUDA.search(image)
    return (int(match["major"]), int(match["minor"])) if match else None


def inference_ami_for(image: str, instance_types: list[str]) -> str | None:
    """The host AMI the image's CUDA needs, or None for CPU/Neuron instances.

    By CUDA major version, as the Deep Learning Containers repository pairs them: 12.x on the
    driver-550 AMI, 13.x on the driver-580 one. An image whose tag names no CUDA gets the
    driver-580 AMI, the repository's own default for its tests.
    """
    if not all(is_gpu_instance(t) for t in instance_types):
        return None
    cuda = cuda_of(image)
    if cuda is not None and cuda[0] <= 12:
        return AMI_CUDA12
    return AMI_CUDA13


def vllm_version(image: str) -> str | None:
    """The vLLM version an AWS vLLM image tag names (`…/vllm:0.30.0-gpu-…` -> 0.30.0)."""
    match = _VLLM_VERSION.search(image)
    return match["version"] if match else None
