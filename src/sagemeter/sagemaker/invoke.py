"""One prompt to one endpoint, for `sagemeter sagemaker invoke`: the same client `measure` uses."""

from __future__ import annotations

from collections.abc import Callable

from sagemeter.sagemaker.describe import deployment_info
from sagemeter.targets import SageMakerTarget
from sagemeter.transport.chat import ChatRequest
from sagemeter.transport.record import LiveRecord, RequestRecord
from sagemeter.transport.sagemaker import SageMakerRuntimeClient, open_sagemaker_client


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
