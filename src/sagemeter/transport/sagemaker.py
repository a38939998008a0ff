"""The SageMaker runtime client: boto3 `sagemaker-runtime` in-process, pooled, one per endpoint.

boto3 is synchronous, so each request runs in a thread of a pool sized to the concurrency (the
botocore connection pool is sized the same), and times are taken in that thread as the bytes
arrive. Streaming uses `invoke_endpoint_with_response_stream`: the vLLM container's OpenAI-style
SSE lines (`data: {...}`, `data: [DONE]`) or LMI's plain JSON lines arrive inside event-stream
`PayloadPart`s whose boundaries do not follow lines, so lines are reassembled across parts.
Generations are never retried automatically; every failure becomes a failed `RequestRecord`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EventStreamError,
    NoCredentialsError,
    ReadTimeoutError,
)

from sagemeter import __version__
from sagemeter.clients.base import ChatRequest, RequestRecord
from sagemeter.clients.stream import (
    StreamState,
    TextCallback,
    chat_body,
    failed_record,
    plain_record,
)
from sagemeter.errors import UserError
from sagemeter.targets import SageMakerTarget

if TYPE_CHECKING:
    from mypy_boto3_sagemaker_runtime import SageMakerRuntimeClient as Boto3RuntimeClient

# A 512-token reply at ~50 tok/s takes 10 s; SageMaker cuts plain invocations at 60 s. The read
# timeout is per socket read, so it also bounds a silent gap inside a stream.
DEFAULT_READ_TIMEOUT_S = 90.0
CONNECT_TIMEOUT_S = 10.0


def runtime_config(concurrency: int, read_timeout_s: float = DEFAULT_READ_TIMEOUT_S) -> Config:
    """A pool as wide as the concurrency, a read timeout above SageMaker's 60 s, no retries."""
    return Config(
        max_pool_connections=max(1, concurrency),
        read_timeout=read_timeout_s,
        connect_timeout=CONNECT_TIMEOUT_S,
        retries={"mode": "standard", "total_max_attempts": 1},
        tcp_keepalive=True,
        user_agent_extra=f"sagemeter/{__version__}",
    )


class LineAssembler:
    """Bytes in, complete lines out: a line may span parts, and a part may hold many lines."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[str]:
        self._buffer += data
        *complete, self._buffer = self._buffer.split(b"\n")
        return [line.decode("utf-8", "replace").rstrip("\r") for line in complete]

    def flush(self) -> list[str]:
        rest, self._buffer = self._buffer, b""
        text = rest.decode("utf-8", "replace").rstrip("\r")
        return [text] if text.strip() else []


def _client_error_reason(exc: ClientError) -> str:
    error = exc.response.get("Error", {})
    code = error.get("Code") or "ClientError"
    message = " ".join(str(error.get("Message") or "").split())[:200]
    if code == "ModelError":
        original = exc.response.get("OriginalStatusCode") or error.get("OriginalStatusCode")
        if original:
            code = f"ModelError (container answered {original})"
    return f"{code}: {message}" if message else str(code)


class SageMakerRuntimeClient:
    """Chat completions against one SageMaker endpoint through `sagemaker-runtime`."""

    def __init__(
        self,
        name: str,
        region: str,
        *,
        concurrency: int = 16,
        model: str | None = None,
        read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
        session: boto3.session.Session | None = None,
        info_lookup: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.name = name
        self._info_lookup = info_lookup
        self.region = region
        self.model = model
        self._model_resolved = model is not None
        self._info: dict[str, Any] = {}
        self._session = session or boto3.session.Session()
        self._runtime: Boto3RuntimeClient = self._session.client(
            "sagemaker-runtime",
            region_name=region,
            config=runtime_config(concurrency, read_timeout_s),
        )
        self._executor = ThreadPoolExecutor(
            max_workers=max(1, concurrency), thread_name_prefix=f"sagemeter-{name}"
        )
        self._resolve_lock = asyncio.Lock()

    async def __aenter__(self) -> SageMakerRuntimeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        """Stop the threads and close the connection pool (for callers without a loop)."""
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._runtime.close()

    async def _run(self, fn: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def _ensure_info(self) -> None:
        async with self._resolve_lock:
            if not self._info:
                self._info = await self._run(self._lookup)
                if not self._model_resolved:
                    self.model = self._info.get("model")
                    self._model_resolved = True

    def _lookup(self) -> dict[str, Any]:
        """What the deployment says about itself (served model name, image, engine), if asked."""
        if self._info_lookup is None:
            return {"model": self.model} if self.model else {}
        try:
            return self._info_lookup()
        except Exception:  # best effort: the endpoint answers whether or not we can describe it
            return {"model": self.model} if self.model else {}

    async def describe(self) -> dict[str, Any]:
        await self._ensure_info()
        info = {"endpoint": self.name, "region": self.region, **self._info}
        if self.model:
            info["model"] = self.model
        return info

    def body(self, request: ChatRequest) -> dict[str, Any]:
        return chat_body(request, self.model)

    async def chat(self, request: ChatRequest) -> RequestRecord:
        if not self._model_resolved:
            await self._ensure_info()
        body = json.dumps(self.body(request)).encode()
        return await self._run(lambda: self.chat_sync(request, body))  # type: ignore[no-any-return]

    def chat_sync(
        self, request: ChatRequest, body: bytes, on_text: TextCallback | None = None
    ) -> RequestRecord:
        """One request, in the calling thread; `on_text` hears each piece of a stream."""
        sent_at = time.perf_counter()
        try:
            if request.stream:
                return self._stream(request, body, sent_at, on_text)
            return self._plain(request, body, sent_at)
        except EventStreamError as exc:
            return failed_record(request, sent_at, f"stream error: {_client_error_reason(exc)}")
        except ClientError as exc:
            return failed_record(request, sent_at, _client_error_reason(exc))
        except (ReadTimeoutError, ConnectTimeoutError) as exc:
            return failed_record(request, sent_at, f"timeout: {type(exc).__name__}")
        except NoCredentialsError:
            return failed_record(request, sent_at, "no AWS credentials")
        except BotoCoreError as exc:
            return failed_record(request, sent_at, f"connection: {type(exc).__name__}: {exc}")

    def _plain(self, request: ChatRequest, body: bytes, sent_at: float) -> RequestRecord:
        response = self._runtime.invoke_endpoint(
            EndpointName=self.name,
            Body=body,
            ContentType="application/json",
            Accept="application/json",
        )
        raw = response["Body"].read()
        return plain_record(request, sent_at, time.perf_counter() - sent_at, raw)

    def _stream(
        self, request: ChatRequest, body: bytes, sent_at: float, on_text: TextCallback | None
    ) -> RequestRecord:
        response = self._runtime.invoke_endpoint_with_response_stream(
            EndpointName=self.name, Body=body, ContentType="application/json"
        )
        state = StreamState(on_text)
        assembler = LineAssembler()
        stream = response["Body"]
        try:
            for line, now in _lines(stream, assembler, sent_at):
                state.line(line, now)
                if state.error:
                    break
        finally:
            stream.close()
        return state.record(request, sent_at)


def _lines(stream: Any, assembler: LineAssembler, sent_at: float) -> Iterator[tuple[str, float]]:
    """Each complete line with the time its last byte arrived (seconds after `sent_at`)."""
    now = 0.0
    for event in stream:
        part = event.get("PayloadPart")
        if not part:
            continue
        now = time.perf_counter() - sent_at
        for line in assembler.feed(part.get("Bytes", b"")):
            yield line, now
    for line in assembler.flush():
        yield line, now


def open_sagemaker_client(
    target: SageMakerTarget, concurrency: int, *, model: str | None = None
) -> SageMakerRuntimeClient:
    """A client for `NAME@REGION`; fails with one line when no AWS credentials can be found.

    Without `model`, the first request looks up the name vLLM serves (from the local record or
    the endpoint's model) so the body names it, as the AWS vLLM container expects.
    """
    from sagemeter.backends.sagemaker.describe import deployment_info

    session = boto3.session.Session()
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
        session=session,
        info_lookup=lambda: deployment_info(target.name, target.region, session=session),
    )
