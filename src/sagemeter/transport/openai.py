"""The OpenAI-compatible wire: chat completions over the one HTTP engine.

Single requests go over this process's kept-alive connections (`client.HttpClient`); requests at
once go to worker processes (`batch.BatchSender`). Both use the same connection code, token-event
rule and record type, so decode, parallel, quality and the load generator measure alike.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sagemeter.request_record import RequestRecord
from sagemeter.transport.batch import BatchSender, BatchWire
from sagemeter.transport.chat import BatchRun, ChatRequest, Unreachable, chat_body, read_plain_reply
from sagemeter.transport.client import (
    DEFAULT_STALL_S,
    DEFAULT_TIMEOUT_S,
    HttpClient,
    TransportError,
)
from sagemeter.transport.events import check_reply_model
from sagemeter.transport.json_values import whole
from sagemeter.transport.models_list import first_model
from sagemeter.transport.retry import RetryPolicy

CHAT_PATH = "/v1/chat/completions"
PREFLIGHT_PROMPT = "Say OK."
PREFLIGHT_TOKENS = 4


class OpenAIChat:
    """Chat completions against one OpenAI-compatible server (`base_url`, /v1 or not)."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        stall_s: float = DEFAULT_STALL_S,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.http = HttpClient(
            base_url,
            api_key=api_key,
            timeout_s=timeout_s,
            stall_s=stall_s,
            retry=retry or RetryPolicy(),
        )
        self.model = model
        self.max_model_len: int | None = None  # the context, where /v1/models says it (vLLM)
        self._model_asked = model is not None  # a given model needs no question per request
        self._models_read = False
        self.reply_model: str | None = None  # the `model` the first reply named
        self._batches = BatchSender()

    @property
    def base_url(self) -> str:
        return self.http.address.base_url + "/v1"

    async def aclose(self) -> None:
        self._batches.close()
        await self.http.aclose()

    async def __aenter__(self) -> OpenAIChat:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def resolve_model(self) -> str | None:
        """The server's first model id (vLLM needs it in every body; a model given to the
        client wins) and its context length; None when it lists none."""
        if not self._model_asked:
            self._model_asked = True
            await self._read_models()
        return self.model

    async def _read_models(self) -> None:
        """Ask /v1/models once: the first model's id (unless one was given) and its context."""
        if self._models_read:
            return
        self._models_read = True
        try:
            reply = await self.http.call_json("GET", "/v1/models")
        except TransportError:
            return

        first = first_model(reply.payload) if reply.status == 200 else None
        if first is not None:
            self.model = self.model or str(first["id"])
            self.max_model_len = _positive(first.get("max_model_len"))

    async def describe(self) -> dict[str, Any]:
        """Engine, version, model and context as the server says (/v1/models, llama.cpp
        /props, vLLM /version); asked once per measurement, never per request."""
        await self._read_models()
        info: dict[str, Any] = {"base_url": self.base_url, "model": await self.resolve_model()}
        if self.max_model_len is not None:
            info["max_model_len"] = self.max_model_len
        for path, key in (("/props", "build_info"), ("/version", "version")):
            try:
                reply = await self.http.call_json("GET", path, timeout_s=5.0)
            except TransportError:
                continue
            facts = reply.payload
            if reply.status != 200 or not isinstance(facts, dict):
                continue
            settings = facts.get("default_generation_settings")
            context = _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None
            if context is not None:
                info["n_ctx"] = context  # llama.cpp: one slot's context
            template = facts.get("chat_template")
            if isinstance(template, str) and template:
                info["chat_template_sha256"] = hashlib.sha256(template.encode()).hexdigest()
            value = facts.get(key)
            if value:
                info["engine_version"] = str(value)
                info["engine"] = "llama.cpp" if key == "build_info" else "vllm"
                break
        return info

    def payload(self, request: ChatRequest) -> bytes:
        body = chat_body(request, self.model)
        return self.http.request_bytes("POST", CHAT_PATH, body, stream=request.stream)

    async def chat(self, request: ChatRequest) -> RequestRecord:
        await self.resolve_model()
        record = await self.http.exchange(
            self.payload(request), stream=request.stream, max_tokens=request.max_tokens
        )
        if not request.stream:
            read_plain_reply(record)
        check_reply_model(record, self.reply_model)
        if self.reply_model is None and record.error is None:
            self.reply_model = record.model
        return self.http.freeze(record)

    async def batch(self, requests: list[ChatRequest]) -> BatchRun:
        await self.resolve_model()
        wire = BatchWire(
            address=self.http.address,
            timeout_s=self.http.timeout_s,
            stall_s=self.http.stall_s,
            retry=self.http.retry,
            max_tokens=requests[0].max_tokens if requests else None,
            expected_model=self.reply_model,
        )
        payloads = [self.payload(request) for request in requests]
        return await self._batches.send(wire, payloads, self.http.origin_wall)

    async def preflight(self) -> None:
        """A whole and a streamed short reply, each checked for what a chat API must give."""
        await self.resolve_model()
        plain = await self.chat(
            ChatRequest(prompt=PREFLIGHT_PROMPT, max_tokens=PREFLIGHT_TOKENS, stream=False)
        )
        if not plain.ok:
            raise Unreachable(str(plain.error))
        streamed = await self.chat(
            ChatRequest(prompt=PREFLIGHT_PROMPT, max_tokens=PREFLIGHT_TOKENS, stream=True)
        )
        if not streamed.ok:
            raise Unreachable(f"a streamed reply: {streamed.error}")
        if not streamed.arrivals_us and not streamed.usage_tokens:
            raise Unreachable("the streamed reply carried no token")


def _positive(value: Any) -> int | None:
    """A positive JSON integer (a context length), else None."""
    found = whole(value)
    return found if found is not None and found > 0 else None
