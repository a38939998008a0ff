"""The OpenAI-compatible HTTP client: one pooled httpx connection set per endpoint, SSE streaming.

Every request becomes a `RequestRecord`; HTTP errors, broken streams, malformed events and
timeouts become failed records with their reason, so a measurement can count them.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import httpx

from sagemeter.clients.base import ChatRequest, RequestRecord
from sagemeter.clients.sse import iter_sse_data
from sagemeter.clients.stream import StreamState, chat_body, failed_record, plain_record

DEFAULT_REQUEST_TIMEOUT_S = 600.0


class OpenAIClient:
    """Chat completions against `base_url` (ending in /v1), with a pool sized for `concurrency`."""

    def __init__(
        self,
        base_url: str,
        *,
        concurrency: int = 16,
        model: str | None = None,
        api_key: str | None = None,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            limits=httpx.Limits(
                max_connections=concurrency,
                max_keepalive_connections=concurrency,
                keepalive_expiry=120.0,
            ),
            timeout=httpx.Timeout(request_timeout_s, connect=10.0),
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> OpenAIClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def resolve_model(self) -> str | None:
        """The server's first model id (vLLM needs it in every body); None when it lists none."""
        if self.model is None:
            try:
                response = await self._http.get("/models", timeout=10.0)
                response.raise_for_status()
                models = response.json().get("data") or []
                self.model = str(models[0]["id"]) if models else None
            except (httpx.HTTPError, ValueError, KeyError, TypeError, IndexError):
                self.model = None
        return self.model

    async def describe(self) -> dict[str, Any]:
        """Engine, version and model as the server says (llama.cpp /props, vLLM /version)."""
        info: dict[str, Any] = {"base_url": self.base_url, "model": await self.resolve_model()}
        root = self.base_url.removesuffix("/v1")
        for path, key in (("/props", "build_info"), ("/version", "version")):
            try:
                response = await self._http.get(root + path, timeout=5.0)
                if response.status_code == 200:
                    facts = response.json()
                    template = facts.get("chat_template")
                    if isinstance(template, str) and template:
                        info["chat_template_sha256"] = hashlib.sha256(template.encode()).hexdigest()
                    value = facts.get(key)
                    if value:
                        info["engine_version"] = str(value)
                        info["engine"] = "llama.cpp" if key == "build_info" else "vllm"
                        break
            except (httpx.HTTPError, ValueError, AttributeError):
                continue
        return info

    async def chat(self, request: ChatRequest) -> RequestRecord:
        if self.model is None:
            await self.resolve_model()
        body = chat_body(request, self.model)
        for attempt in range(2):
            sent_at = time.perf_counter()
            try:
                if request.stream:
                    return await self._chat_streaming(request, body, sent_at)
                return await self._chat_plain(request, body, sent_at)
            except httpx.RemoteProtocolError as exc:
                # A kept-alive connection the server closed just as we reused it: nothing was
                # processed, so send once more on a fresh connection (as browsers do).
                if attempt == 0 and _never_answered(exc):
                    continue
                return failed_record(request, sent_at, f"connection: {type(exc).__name__}: {exc}")
            except httpx.TimeoutException as exc:
                return failed_record(request, sent_at, f"timeout: {type(exc).__name__}")
            except httpx.HTTPError as exc:
                return failed_record(request, sent_at, f"connection: {type(exc).__name__}: {exc}")
        raise AssertionError("unreachable: the second attempt always returns")

    async def _chat_plain(
        self, request: ChatRequest, body: dict[str, Any], sent_at: float
    ) -> RequestRecord:
        response = await self._http.post("/chat/completions", json=body)
        total = time.perf_counter() - sent_at
        if response.status_code != 200:
            return failed_record(request, sent_at, _http_error(response.status_code, response.text))
        return plain_record(request, sent_at, total, response.content)

    async def _chat_streaming(
        self, request: ChatRequest, body: dict[str, Any], sent_at: float
    ) -> RequestRecord:
        state = StreamState()
        async with self._http.stream("POST", "/chat/completions", json=body) as response:
            if response.status_code != 200:
                text = (await response.aread()).decode("utf-8", "replace")
                return failed_record(request, sent_at, _http_error(response.status_code, text))
            async for data in iter_sse_data(response.aiter_lines()):
                # After [DONE], read on to the end of the body (a few bytes) so the connection
                # goes back to the pool instead of being closed; stop at once on an error.
                if not state.done:
                    state.data(data, time.perf_counter() - sent_at)
                if state.error:
                    break
        return state.record(request, sent_at)


def _never_answered(exc: httpx.RemoteProtocolError) -> bool:
    return "without sending a response" in str(exc)


def _http_error(status: int, text: str) -> str:
    snippet = " ".join(text.split())[:160]
    return f"HTTP {status}: {snippet}" if snippet else f"HTTP {status}"
