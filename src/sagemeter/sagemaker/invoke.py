"""A SageMaker endpoint's runtime client (the transport's, with the platform's deployment facts)
and one prompt to it, for `sagemeter sagemaker invoke`: the same client `measure` uses."""

from __future__ import annotations

from collections.abc import Callable

from sagemeter.errors import UserError
from sagemeter.request_record import LiveRecord, RequestRecord
from sagemeter.sagemaker.describe import deployment_info
from sagemeter.targets import SageMakerTarget
from sagemeter.transport.aws_session import new_session
from sagemeter.transport.chat import ChatRequest
from sagemeter.transport.retry import RetryPolicy
from sagemeter.transport.sagemaker import DEFAULT_READ_TIMEOUT_S, SageMakerRuntimeClient


def invoke(
    name: str,
    region: str,
    prompt: str,
    *,
    max_tokens: int = 256,
    stream: bool = False,
    temperature: float = 0.0,
    model: str | None = None,
    on_text: Callable[[str], None] | None = None,
) -> RequestRecord:
    """Send `prompt` and return the record (text, timings, tokens); `on_text` hears a stream."""
    client: SageMakerRuntimeClient = open_sagemaker_client(
        SageMakerTarget(name, region), 1, model=model
    )
    try:
        if client.model is None:
            client.model = deployment_info(name, region).get("model")
        request = ChatRequest(
            prompt=prompt, max_tokens=max_tokens, temperature=temperature, stream=stream
        )
        live = LiveRecord(0, 0, max_tokens=max_tokens)
        return client.attempt(request, client.body(request), live, on_text).freeze(client.origin)
    finally:
        client.close()


def open_sagemaker_client(
    target: SageMakerTarget,
    concurrency: int,
    *,
    model: str | None = None,
    timeout_s: float = DEFAULT_READ_TIMEOUT_S,
    retry: RetryPolicy | None = None,
) -> SageMakerRuntimeClient:
    """A client for `NAME@REGION`; fails with one line when no AWS credentials can be found.

    Without `model`, the first request looks up the name vLLM serves (from the local record or
    the endpoint's model) so the body names it, as the AWS vLLM container expects.
    """
    session = new_session()
    if session.get_credentials() is None:
        raise UserError(
            f"target {target}: no AWS credentials found: run `aws configure` (or `aws sso "
            "login`), or set AWS_PROFILE / AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        )
    return SageMakerRuntimeClient(
        target.name,
        target.region,
        concurrency=concurrency,
        model=model,
        read_timeout_s=timeout_s,
        retry=retry,
        session=session,
        info_lookup=lambda: {
            "region_source": target.region_source,  # which rule chose the region
            **deployment_info(target.name, target.region, session=session),
        },
    )
