"""Which container runs the model: the AWS vLLM Deep Learning Container for SageMaker, per region.

Source of the account table and the tag: the AWS Deep Learning Containers repository
(github.com/aws/deep-learning-containers), `docs/reference/region_availability.md` ("Private ECR
account IDs by region") and the vLLM SageMaker release data under `docs/src/data/vllm/`, as of
its 2026-08-21 state. Most regions serve the images from account 763104351884; the opt-in
regions below have their own. The tag is overridable (`--image-tag`), and so is the whole
image (`--image`).

The host AMI must carry an NVIDIA driver new enough for the image's CUDA:
`al2-ami-sagemaker-inference-gpu-3-1` has driver 550 (CUDA up to 12.4, forward compatibility
disabled) and `al2023-ami-sagemaker-inference-gpu-4-1` driver 580 (CUDA 12.5 and later, 13.x).
The vLLM SageMaker images 0.13-0.26 are CUDA 12.9 (`cu129`), and the repository's SageMaker
example names the gpu-4-1 AMI for CUDA 12.9; so only images up to `cu124` get gpu-3-1. Without an
`InferenceAmiVersion` the default host AMI cannot start such a container.
"""

from __future__ import annotations

import re

from sagemeter.errors import UserError

IMAGE_TABLE_SOURCE = (
    "github.com/aws/deep-learning-containers docs/reference/region_availability.md "
    "and docs/src/data/vllm/ (2026-08-21)"
)
DEFAULT_ACCOUNT = "763104351884"
REPOSITORY = "vllm"
# The newest vLLM SageMaker release in the source above: vLLM 0.27.1, CUDA 13.0, Ubuntu 22.04.
DEFAULT_VLLM_TAG = "0.27.1-gpu-py312-cu130-ubuntu22.04-sagemaker"

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
    "me-west-1": "124382933778",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
}

_GPU_FAMILIES = re.compile(
    r"^ml\.(g4dn|g5|g6|g6e|g7|g7e|p3|p4d|p4de|p5|p5e|p5en|p6-[a-z0-9]+|p6e-[a-z0-9]+)\."
)
_CUDA = re.compile(r"-cu(?P<major>\d{2})(?P<minor>\d)")
# The newest CUDA the driver-550 AMI (gpu-3-1) runs: 12.4.
_DRIVER_550_CUDA = (12, 4)
_VLLM_VERSION = re.compile(r"/vllm:(?P<version>\d+\.\d+(?:\.\d+)?)")


def vllm_image_uri(region: str, tag: str = DEFAULT_VLLM_TAG) -> str:
    """`<account>.dkr.ecr.<region>.amazonaws.com/vllm:<tag>` for `region`, from the table above."""
    account = DLC_ACCOUNTS.get(region)
    if account is None:
        raise UserError(
            f"no AWS vLLM container account is known for region {region}: pass --image with the "
            f"full image URI (known regions: {', '.join(sorted(DLC_ACCOUNTS))})"
        )
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{account}.dkr.ecr.{region}.{domain}/{REPOSITORY}:{tag}"


def is_gpu_instance(instance_type: str) -> bool:
    return bool(_GPU_FAMILIES.match(instance_type))


def inference_ami_for(image: str, instance_types: list[str]) -> str | None:
    """The host AMI the image's CUDA needs, or None for CPU/Neuron instances.

    CUDA up to 12.4 gets the driver-550 AMI, anything newer (cu125-cu129, cu13x) the driver-580
    one. An image whose tag names no CUDA version gets the driver-580 AMI: it also runs older
    CUDA 12 images, and the current vLLM containers are CUDA 13.
    """
    if not all(is_gpu_instance(t) for t in instance_types):
        return None
    match = _CUDA.search(image)
    if match and (int(match["major"]), int(match["minor"])) <= _DRIVER_550_CUDA:
        return AMI_CUDA12
    return AMI_CUDA13


def vllm_version(image: str) -> str | None:
    """The vLLM version an AWS vLLM image tag names (`…/vllm:0.27.1-gpu-…` -> 0.27.1)."""
    match = _VLLM_VERSION.search(image)
    return match["version"] if match else None
