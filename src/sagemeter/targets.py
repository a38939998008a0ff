"""One string names an endpoint; this module turns it into a typed Target.

Accepted forms:
  http://HOST:PORT[/v1]   any OpenAI-compatible server (vLLM, llama.cpp, SGLang, Ollama)
  local:CHECKPOINT        the embedded llama.cpp engine (a checkpoint name or a .gguf path)
  vllm:CHECKPOINT         a real `vllm serve` started by sagemeter (a checkpoint name, a .gguf
                          path exported to a Hugging Face folder, or a Hugging Face folder)
  NAME@REGION             an Amazon SageMaker real-time endpoint
  NAME                    a SageMaker endpoint: in the region this machine placed it, else in the
                          configured region (AWS_REGION, AWS_DEFAULT_REGION, the profile's)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from sagemeter.errors import UserError

ACCEPTED_FORMS = (
    "http://HOST:PORT (OpenAI-compatible server), local:CHECKPOINT (embedded engine), "
    "vllm:CHECKPOINT (vLLM started by sagemeter), NAME@REGION (SageMaker)"
)

# SageMaker endpoint names (botocore's EndpointName pattern): 1-63 alphanumerics and hyphens,
# not starting or ending with a hyphen. Shared with the SageMaker deploy spec.
SAGEMAKER_ENDPOINT_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
AWS_REGION_NAME = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$")


@dataclass(frozen=True)
class OpenAITarget:
    """A running OpenAI-compatible server; `base_url` always ends in /v1."""

    base_url: str

    @property
    def default_name(self) -> str:
        parts = urlsplit(self.base_url)
        return f"{parts.hostname}-{parts.port}" if parts.port else str(parts.hostname)

    def __str__(self) -> str:
        return self.base_url


@dataclass(frozen=True)
class LocalTarget:
    """A checkpoint for the embedded engine, started and stopped by sagemeter."""

    checkpoint: str

    @property
    def default_name(self) -> str:
        name = self.checkpoint.rsplit("/", 1)[-1]
        return name.removesuffix(".gguf")

    def __str__(self) -> str:
        return f"local:{self.checkpoint}"


@dataclass(frozen=True)
class VllmTarget:
    """A checkpoint served by a real `vllm serve` that sagemeter starts and stops."""

    checkpoint: str

    @property
    def default_name(self) -> str:
        name = self.checkpoint.rstrip("/").rsplit("/", 1)[-1]
        return "vllm-" + name.removesuffix(".gguf")

    def __str__(self) -> str:
        return f"vllm:{self.checkpoint}"


@dataclass(frozen=True)
class SageMakerTarget:
    """An Amazon SageMaker real-time endpoint in one region; `region_source` says which rule chose
    the region (given, recorded, AWS_REGION, AWS_DEFAULT_REGION, profile NAME), kept in results
    but not part of the endpoint's identity."""

    name: str
    region: str
    region_source: str = field(default="given", compare=False)

    @property
    def default_name(self) -> str:
        return self.name

    def __str__(self) -> str:
        return f"{self.name}@{self.region}"


Target = OpenAITarget | LocalTarget | VllmTarget | SageMakerTarget


def parse_target(text: str) -> Target:
    """Parse one target string, or raise UserError naming the accepted forms."""
    raw = text.strip()
    if raw.startswith(("http://", "https://")):
        return _parse_url(raw)
    if raw.startswith("local:"):
        checkpoint = raw.removeprefix("local:").strip()
        if not checkpoint:
            raise UserError(
                f"target {text!r} names no checkpoint; accepted forms: {ACCEPTED_FORMS}"
            )
        return LocalTarget(checkpoint)
    if raw.startswith("vllm:"):
        checkpoint = raw.removeprefix("vllm:").strip()
        if not checkpoint:
            raise UserError(
                f"target {text!r} names no checkpoint; accepted forms: {ACCEPTED_FORMS}"
            )
        return VllmTarget(checkpoint)
    if "@" in raw:
        name, _, region = raw.partition("@")
        if not SAGEMAKER_ENDPOINT_NAME.match(name):
            raise UserError(
                f"target {text!r}: {name!r} is not a valid SageMaker endpoint name "
                "(1-63 letters, digits and hyphens)"
            )
        if not AWS_REGION_NAME.match(region):
            raise UserError(f"target {text!r}: {region!r} is not an AWS region such as us-east-2")
        return SageMakerTarget(name, region)
    if SAGEMAKER_ENDPOINT_NAME.match(raw):
        return _bare_sagemaker(raw, text)
    raise UserError(f"target {text!r} is not understood; accepted forms: {ACCEPTED_FORMS}")


def _bare_sagemaker(name: str, text: str) -> SageMakerTarget:
    """A bare NAME: the region this machine's record says it was placed in (a capacity fallback
    need not be repeated), else the configured one; the one rule of `sagemeter.sagemaker.region`."""
    from sagemeter.sagemaker.aws import Aws
    from sagemeter.sagemaker.region import known_endpoint_region

    choice = known_endpoint_region(name, Aws())
    if choice is None:
        raise UserError(
            f"target {text!r}: no SageMaker endpoint of that name was deployed from here and no "
            f"AWS region is configured; write {name}@REGION or set AWS_REGION; "
            f"accepted forms: {ACCEPTED_FORMS}"
        )
    return SageMakerTarget(name, choice.region, choice.source)


def _parse_url(raw: str) -> OpenAITarget:
    parts = urlsplit(raw)
    if not parts.hostname:
        raise UserError(f"target {raw!r} has no host; accepted forms: {ACCEPTED_FORMS}")
    try:
        port = parts.port
    except ValueError:
        raise UserError(
            f"target {raw!r} has a bad port; accepted forms: {ACCEPTED_FORMS}"
        ) from None
    if port == 0:
        raise UserError(f"target {raw!r}: port 0 is no server's port; give the port it listens on")
    if parts.query or parts.fragment:
        raise UserError(f"target {raw!r} must not carry a query or fragment")
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    netloc = f"{host}:{port}" if port else host
    return OpenAITarget(f"{parts.scheme}://{netloc}{path}/v1")
