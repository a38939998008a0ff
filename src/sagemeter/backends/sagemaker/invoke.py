"""One prompt to one endpoint, for `sagemeter invoke`: the same client `measure` uses."""

from __future__ import annotations

import json
from collections.abc import Callable

from sagemeter.backends.sagemaker.describe import deployment_info
from sagemeter.clients.base import ChatRequest, RequestRecord
from sagemeter.clients.sagemaker import SageMakerRuntimeClient, open_sagemaker_client
from sagemeter.targets import SageMakerTarget


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
        body = json.dumps(client.body(request)).encode()
        return client.chat_sync(request, body, on_text=on_text)
    finally:
        client.close()
