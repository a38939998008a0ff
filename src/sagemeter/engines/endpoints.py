"""From a Target to something to measure: start what needs starting, open the right client.

This is the one place that knows which backend goes with which target; measurements only see
the `Endpoint` it yields (a client, what the backend knows about start-up, and where it runs).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sagemeter.engine_registry import StartRequest, engine_of
from sagemeter.engines.llamacpp import DEFAULT_CTX_PER_SLOT
from sagemeter.results import StartupFacts
from sagemeter.results.fidelity_record import Vocabulary
from sagemeter.targets import EngineTarget, OpenAITarget, SageMakerTarget, Target
from sagemeter.transport.chat import ChatClient
from sagemeter.transport.client import DEFAULT_STALL_S, DEFAULT_TIMEOUT_S
from sagemeter.transport.openai import OpenAIChat
from sagemeter.transport.retry import DEFAULT_RETRIES, RetryPolicy

WaitLineFn = Callable[[str], None]  # told a line while an engine starts (`engines.waiting`)


@dataclass(frozen=True)
class WireOptions:
    """How every request is sent: its time limits, how often a transient failure is retried,
    and the API key for hosted endpoints (never written anywhere)."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    stall_s: float = DEFAULT_STALL_S
    retries: int = DEFAULT_RETRIES
    api_key: str | None = field(default=None, repr=False)

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(retries=self.retries)


@dataclass
class Endpoint:
    """A reachable endpoint: its client, and what its backend can tell about it."""

    target: Target
    backend: str
    client: ChatClient
    startup_facts: Callable[[], StartupFacts | None] = lambda: None
    environment: dict[str, Any] = field(default_factory=dict)
    http_root: str | None = None  # the server's own HTTP API (logprobs), where it has one
    api_key: str | None = field(default=None, repr=False)
    # The checkpoint's own vocabulary fingerprint, where sagemeter holds its files (fidelity).
    vocabulary: Callable[[], Vocabulary | None] = lambda: None
    # The checkpoint's own tokenizer (a GGUF file, a Hugging Face folder), where sagemeter holds
    # its files: it counts prompts a server gives no count of (the prefill phase).
    tokenizer_path: Path | None = None
    # The server process sagemeter started ("pid 123", "pid 123, ended"); None: not ours.
    process: Callable[[], str | None] = lambda: None


class ServerProcess(Protocol):
    """What a server sagemeter starts tells of its process."""

    @property
    def pid(self) -> int | None: ...

    def is_running(self) -> bool: ...


def process_of(server: ServerProcess) -> Callable[[], str | None]:
    """The process's identity as the server-identity check reads it: its pid, and whether it
    still runs (a server restarted or gone between phases is not the one measured before)."""

    def state() -> str | None:
        if server.pid is None:
            return None
        return f"pid {server.pid}" + ("" if server.is_running() else ", ended")

    return state


def _no_line(_: str) -> None:
    """Default: nothing to show while a server starts."""


@contextlib.asynccontextmanager
async def open_endpoint(
    target: Target,
    *,
    concurrency: int,
    max_reply_tokens: int = 512,
    max_prompt_tokens: int = 0,
    log_path: Path | None = None,
    wire: WireOptions | None = None,
    startup_timeout_s: float | None = None,
    on_wait: WaitLineFn | None = None,
) -> AsyncIterator[Endpoint]:
    """Yield an open Endpoint for `target`; a local engine started here is stopped on exit.

    While an engine started here loads, `on_wait` is told a line with the seconds spent and the
    last line of its log (`engines.waiting`), a few times a second.

    A vLLM started here gets a context for the longest reply plus the longest prompt
    (`max_prompt_tokens`, at least PROMPT_ALLOWANCE_TOKENS): its KV cache is sized by memory, not
    by the context. The embedded llama.cpp keeps its slots at the longest reply plus
    PROMPT_ALLOWANCE_TOKENS (it allocates every slot's whole context at start, for as many slots
    as requests at once); it says its context (`n_ctx`), and a longer prompt is cut to fit with a
    note. Every engine's server (local, vllm, cmd, plug-ins) is started by its registry entry;
    `startup_timeout_s` (None: the engine's own) bounds the wait for it to answer."""
    wire = wire or WireOptions()
    if isinstance(target, OpenAITarget):
        async with chat_client(target.base_url, wire) as client:
            yield Endpoint(
                target=target,
                backend="openai-http",
                client=client,
                http_root=target.base_url,
                api_key=wire.api_key,
            )
    elif isinstance(target, SageMakerTarget):
        async with _sagemaker_endpoint(target, concurrency, wire) as endpoint:
            yield endpoint
    else:
        request = StartRequest(
            concurrency=concurrency,
            max_reply_tokens=max_reply_tokens,
            max_prompt_tokens=max_prompt_tokens,
            log_path=log_path,
            wire=wire,
            startup_timeout_s=startup_timeout_s,
            on_wait=on_wait or _no_line,
        )
        async with engine_of(target).endpoint(target, request) as endpoint:
            yield endpoint


def placement_hint(target: Target) -> str:
    """For a SageMaker target this machine placed in another region, where it is; else ""."""
    if not isinstance(target, SageMakerTarget):
        return ""
    from sagemeter.sagemaker import placed_elsewhere  # SageMaker's package: only when needed

    hint = placed_elsewhere(target.name, target.region)
    return f" ({hint})" if hint else ""


def check_target(target: Target) -> None:
    """Fail fast, before anything starts, on a target that cannot work (e.g. unknown checkpoint)."""
    if isinstance(target, EngineTarget):
        engine_of(target).check(target)


PROMPT_ALLOWANCE_TOKENS = 512
# Beyond a prefill phase's longest prompt: its sizing's error and the one reply token.
PROMPT_MARGIN_TOKENS = 128


def slot_context(max_reply_tokens: int, max_prompt_tokens: int = 0) -> int:
    """Context per engine slot: the longest reply plus room for the longest prompt (at least
    PROMPT_ALLOWANCE_TOKENS), in 256-token steps."""
    prompt = max(PROMPT_ALLOWANCE_TOKENS, max_prompt_tokens + PROMPT_MARGIN_TOKENS)
    needed = max_reply_tokens + prompt
    return max(DEFAULT_CTX_PER_SLOT, -(-needed // 256) * 256)


def chat_client(base_url: str, wire: WireOptions, model: str | None = None) -> OpenAIChat:
    return OpenAIChat(
        base_url,
        model=model,
        api_key=wire.api_key,
        timeout_s=wire.timeout_s,
        stall_s=wire.stall_s,
        retry=wire.retry,
    )


@contextlib.asynccontextmanager
async def _sagemaker_endpoint(
    target: SageMakerTarget, concurrency: int, wire: WireOptions
) -> AsyncIterator[Endpoint]:
    # Imported here: the SageMaker package (botocore's config and its modules) would cost every
    # measurement of an HTTP server or a local engine about 0.2 s of start-up.
    from sagemeter import sagemaker as backend
    from sagemeter.sagemaker.invoke import open_sagemaker_client

    client = open_sagemaker_client(target, concurrency, timeout_s=wire.timeout_s, retry=wire.retry)
    try:
        yield Endpoint(
            target=target,
            backend="sagemaker",
            client=client,
            startup_facts=lambda: backend.startup_facts(target.name, target.region),
        )
    finally:
        await client.aclose()
