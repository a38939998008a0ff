"""The SageMaker runtime wire: boto3 `sagemaker-runtime` in-process, pooled, one per endpoint.

boto3 is synchronous, so each request runs in a thread of a pool sized to the concurrency (the
botocore connection pool is sized the same), and times are taken in that thread as the bytes
arrive. Streaming uses `invoke_endpoint_with_response_stream`: the vLLM container's OpenAI-style
SSE events (`data: {...}`, `data: [DONE]`) or LMI's plain JSON lines arrive inside event-stream
`PayloadPart`s whose boundaries do not follow events; they are split with the same byte-level
splitter and token-event rule as the HTTP engine, into the same record type. botocore's own
retries are off: transient failures (throttling, the container's 429/5xx) are sent again by the
same retry policy as every wire, and every try is kept on the record.

botocore reads an event stream (and a whole body's error reply) straight from urllib3, so a
connection cut mid-reply raises urllib3's own exceptions, not botocore's. Every exception those
reads can raise ends as a failed record with its reason, never as a traceback, by the HTTP wire's
rule: lost before any answer (botocore's `ConnectionClosedError`) is sent again; cut after the
answer began (its status line came) is a failure that is not.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from botocore.config import Config
from botocore.eventstream import ParserError as EventStreamParserError
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EventStreamError,
    IncompleteReadError,
    NoCredentialsError,
    ReadTimeoutError,
    ResponseStreamingError,
)
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import ProtocolError as Urllib3ProtocolError
from urllib3.exceptions import ReadTimeoutError as Urllib3ReadTimeoutError

from sagemeter import __version__
from sagemeter.request_record import LiveRecord, RequestRecord
from sagemeter.transport.aws_session import new_session
from sagemeter.transport.chat import (
    BatchRun,
    ChatRequest,
    Unreachable,
    chat_body,
    read_plain_reply,
)
from sagemeter.transport.events import TextCallback, check_reply_model, stream_outcome, take_event
from sagemeter.transport.health import CLIENT_CPU_SHARE_MAX, pct
from sagemeter.transport.http1 import TRANSIENT_STATUSES
from sagemeter.transport.pool import available_cores
from sagemeter.transport.retry import RetryPolicy, send_with_retries
from sagemeter.transport.sse import SseSplitter
from sagemeter.transport.upstream import one_line

if TYPE_CHECKING:
    import boto3.session
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


# Runtime error codes worth sending again: the service was busy, or the container said 429/5xx.
TRANSIENT_CODES = frozenset(
    {
        "ThrottlingException",
        "ServiceUnavailable",
        "InternalFailure",
        "InternalDependencyException",
        "ModelNotReadyException",
    }
)


def _client_error_reason(exc: ClientError) -> tuple[str, bool, int | None]:
    """(the reason in one line, whether it is worth sending again, the container's status)."""
    error = exc.response.get("Error", {})
    code = str(error.get("Code") or "ClientError")
    message = one_line(str(error.get("Message") or ""))
    raw_status = str(exc.response.get("OriginalStatusCode") or error.get("OriginalStatusCode"))
    status = int(raw_status) if raw_status.isdigit() else None
    transient = code in TRANSIENT_CODES or (status in TRANSIENT_STATUSES)
    label = code
    if code == "ModelError" and status is not None:
        label = f"ModelError (container answered {status})"
    return (f"{label}: {message}" if message else label), transient, status


# What a read of the reply can raise once its status line came: botocore's wrappers of a cut body,
# and urllib3's own errors (an event stream is read from urllib3 unwrapped).
CUT_MID_REPLY = (ResponseStreamingError, IncompleteReadError, Urllib3Error)


def _network_reason(exc: Exception) -> str:
    """The exception botocore wrapped (else `exc`) named by its type, on one line."""
    inner = getattr(exc, "kwargs", {}).get("error", exc)
    if isinstance(inner, Urllib3ProtocolError) and inner.args:
        # ('Connection broken: IncompleteRead(…)', IncompleteRead(…)): the first says it all
        # unless the second adds the cause (RemoteDisconnected('Remote end closed …')).
        words = [str(inner.args[0])]
        words += [f"({arg})" for arg in inner.args[1:2] if str(arg) not in words[0]]
        text = " ".join(words)
    else:
        text = str(inner)
    return f"{type(inner).__name__}: {one_line(text)}" if text else type(inner).__name__


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
        retry: RetryPolicy | None = None,
        session: boto3.session.Session | None = None,
        info_lookup: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.name = name
        self._info_lookup = info_lookup
        self.region = region
        self.model = model
        self.retry = retry or RetryPolicy()
        self.timeout_s = read_timeout_s
        self.origin = time.perf_counter()
        self._model_resolved = model is not None
        self.reply_model: str | None = None  # the `model` the first reply named
        self._info: dict[str, Any] = {}
        self._session = session or new_session()
        self._runtime: Boto3RuntimeClient = self._session.client(
            "sagemaker-runtime",
            region_name=region,
            config=runtime_config(concurrency, read_timeout_s),
        )
        self._executor = ThreadPoolExecutor(
            max_workers=max(1, concurrency), thread_name_prefix=f"sagemeter-{name}"
        )
        self._resolve_lock = asyncio.Lock()
        self._numbers = itertools.count()

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

    def body(self, request: ChatRequest) -> bytes:
        return json.dumps(chat_body(request, self.model)).encode()

    async def chat(self, request: ChatRequest) -> RequestRecord:
        if not self._model_resolved:
            await self._ensure_info()
        body = self.body(request)
        number = next(self._numbers)

        async def send(record: LiveRecord) -> LiveRecord:
            return await self._run(lambda: self.attempt(request, body, record))  # type: ignore[no-any-return]

        record = await send_with_retries(
            send, lambda: LiveRecord(0, number, max_tokens=request.max_tokens), self.retry
        )
        # A reply from another model than the first replies' (the endpoint redeployed with
        # another model mid-measure) is a failure, as on an HTTP target (transport/openai.py).
        check_reply_model(record, self.reply_model)
        if self.reply_model is None and record.error is None:
            self.reply_model = record.model
        return record.freeze(self.origin)

    async def batch(self, requests: list[ChatRequest]) -> BatchRun:
        """Every request at once on the thread pool; boto3's CPU is the client's share."""
        cpu_before, started = time.process_time(), time.perf_counter()
        records = list(await asyncio.gather(*(self.chat(request) for request in requests)))
        cpu = time.process_time() - cpu_before
        wall = time.perf_counter() - started
        share = cpu / (wall * available_cores()) if wall > 0 else 0.0
        limits = []
        if share > CLIENT_CPU_SHARE_MAX:
            limits.append(
                f"the client used {pct(share)} of the cores (> {pct(CLIENT_CPU_SHARE_MAX)}, "
                "CLIENT_CPU_SHARE_MAX)"
            )
        for index, record in enumerate(records):
            record.stream = index
        return BatchRun(records=records, workers=0, client_cpu_s=cpu, limits=limits)

    async def preflight(self) -> None:
        """One short streamed reply: the endpoint answers, streams, and sends a token."""
        record = await self.chat(ChatRequest(prompt="Say OK.", max_tokens=4, stream=True))
        if not record.ok:
            raise Unreachable(str(record.error))
        if not record.arrivals_us and not record.usage_tokens:
            raise Unreachable("the streamed reply carried no token")

    def attempt(
        self,
        request: ChatRequest,
        body: bytes,
        record: LiveRecord,
        on_text: TextCallback | None = None,
    ) -> LiveRecord:
        """One try, in the calling thread; `on_text` hears each piece of a stream."""
        record.send = time.perf_counter()
        try:
            if request.stream:
                self._stream(body, record, on_text)
            else:
                self._plain(body, record)
        except EventStreamError as exc:
            reason, record.transient, record.status = _client_error_reason(exc)
            record.error = f"stream error: {reason}"
        except ClientError as exc:
            reason, record.transient, record.status = _client_error_reason(exc)
            record.error = reason
        except (ReadTimeoutError, ConnectTimeoutError, Urllib3ReadTimeoutError) as exc:
            record.error = f"timeout: {type(exc).__name__}"
        except ConnectionClosedError as exc:
            # botocore raises it only before a status line came: the endpoint never answered
            # this request, so sending it again is safe (as on the HTTP wire).
            record.transient = True
            record.error = f"connection lost before any answer: {_network_reason(exc)}"
        except CUT_MID_REPLY as exc:
            # The answer had begun: what came may have cost the endpoint its work, and a
            # resend would be another request; a failure, not sent again.
            record.transient = False
            record.error = f"connection lost mid-reply: {_network_reason(exc)}"
        except EventStreamParserError as exc:  # a frame whose lengths or checksum are wrong
            record.error = f"bad event stream mid-reply: {_network_reason(exc)}"
        except NoCredentialsError:
            record.error = "no AWS credentials"
        except BotoCoreError as exc:
            record.error = f"connection: {type(exc).__name__}: {exc}"
        if not record.end:
            record.end = time.perf_counter()
        return record

    def _plain(self, body: bytes, record: LiveRecord) -> None:
        response = self._runtime.invoke_endpoint(
            EndpointName=self.name,
            Body=body,
            ContentType="application/json",
            Accept="application/json",
        )
        record.body = response["Body"].read()
        record.end = time.perf_counter()
        record.status = 200
        read_plain_reply(record)

    def _stream(self, body: bytes, record: LiveRecord, on_text: TextCallback | None) -> None:
        response = self._runtime.invoke_endpoint_with_response_stream(
            EndpointName=self.name, Body=body, ContentType="application/json"
        )
        record.status = 200
        record.pieces = []
        stream = response["Body"]
        splitter: SseSplitter | None = None
        deadline = record.send + self.timeout_s
        try:
            for event in stream:
                part = event.get("PayloadPart")
                if not part:
                    continue
                now = record.end = time.perf_counter()
                data = part.get("Bytes", b"")
                if splitter is None:
                    # LMI's JSON lines have no blank line between events; SSE has.
                    splitter = SseSplitter(lines=data.lstrip().startswith(b"{"))
                for item in splitter.feed(data):
                    take_event(record, item, now, on_text)
                if record.error is not None:
                    return
                if now > deadline:
                    record.error = f"timeout: no complete response within {self.timeout_s:g} s"
                    return
            if splitter is not None:
                tail = splitter.flush()
                if tail:
                    take_event(record, tail, record.end, on_text)
        finally:
            stream.close()
        record.error = stream_outcome(record)
