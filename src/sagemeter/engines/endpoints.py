"""From a Target to something to measure: start what needs starting, open the right client.

This is the one place that knows which backend goes with which target; measurements only see
the `Endpoint` it yields (a client, what the backend knows about start-up, and where it runs).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagemeter.errors import UserError
from sagemeter.fidelity.records import Vocabulary
from sagemeter.results import StartupFacts
from sagemeter.targets import LocalTarget, OpenAITarget, SageMakerTarget, Target, VllmTarget
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


@contextlib.asynccontextmanager
async def open_endpoint(
    target: Target,
    *,
    concurrency: int,
    max_reply_tokens: int = 512,
    max_prompt_tokens: int = 0,
    log_path: Path | None = None,
    wire: WireOptions | None = None,
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
    note."""
    wire = wire or WireOptions()
    if isinstance(target, OpenAITarget):
        async with _chat_client(target.base_url, wire) as client:
            yield Endpoint(
                target=target,
                backend="openai-http",
                client=client,
                http_root=target.base_url,
                api_key=wire.api_key,
            )
    elif isinstance(target, LocalTarget):
        async with _local_endpoint(
            target, concurrency, max_reply_tokens, log_path, wire, on_wait
        ) as endpoint:
            yield endpoint
    elif isinstance(target, VllmTarget):
        from sagemeter.engines.vllm_endpoint import open_vllm_endpoint

        async with open_vllm_endpoint(
            target, max_reply_tokens, log_path, wire, max_prompt_tokens, on_wait
        ) as endpoint:
            yield endpoint
    elif isinstance(target, SageMakerTarget):
        async with _sagemaker_endpoint(target, concurrency, wire) as endpoint:
            yield endpoint
    else:  # pragma: no cover - the Target union is closed
        raise UserError(f"unsupported target {target}")


def placement_hint(target: Target) -> str:
    """For a SageMaker target this machine placed in another region, where it is; else ""."""
    if not isinstance(target, SageMakerTarget):
        return ""
    from sagemeter.sagemaker import placed_elsewhere

    hint = placed_elsewhere(target.name, target.region)
    return f" ({hint})" if hint else ""


def check_target(target: Target) -> None:
    """Fail fast, before anything starts, on a target that cannot work (e.g. unknown checkpoint)."""
    if isinstance(target, LocalTarget):
        from sagemeter.engines.checkpoints import resolve_checkpoint

        resolve_checkpoint(target.checkpoint, derive=False)
    elif isinstance(target, VllmTarget):
        from sagemeter.engines.vllm_server import check_vllm_target

        check_vllm_target(target.checkpoint)


PROMPT_ALLOWANCE_TOKENS = 512
# Beyond a prefill phase's longest prompt: its sizing's error and the one reply token.
PROMPT_MARGIN_TOKENS = 128


def slot_context(max_reply_tokens: int, max_prompt_tokens: int = 0) -> int:
    """Context per engine slot: the longest reply plus room for the longest prompt (at least
    PROMPT_ALLOWANCE_TOKENS), in 256-token steps."""
    from sagemeter.engines.llamacpp import DEFAULT_CTX_PER_SLOT

    prompt = max(PROMPT_ALLOWANCE_TOKENS, max_prompt_tokens + PROMPT_MARGIN_TOKENS)
    needed = max_reply_tokens + prompt
    return max(DEFAULT_CTX_PER_SLOT, -(-needed // 256) * 256)


def _chat_client(base_url: str, wire: WireOptions, model: str | None = None) -> OpenAIChat:
    return OpenAIChat(
        base_url,
        model=model,
        api_key=wire.api_key,
        timeout_s=wire.timeout_s,
        stall_s=wire.stall_s,
        retry=wire.retry,
    )


@contextlib.asynccontextmanager
async def _local_endpoint(
    target: LocalTarget,
    concurrency: int,
    max_reply_tokens: int,
    log_path: Path | None,
    wire: WireOptions,
    on_wait: WaitLineFn | None = None,
) -> AsyncIterator[Endpoint]:
    import asyncio

    from sagemeter.engines.checkpoints import gguf_summary, resolve_checkpoint
    from sagemeter.engines.file_hashes import sha256_of
    from sagemeter.engines.llamacpp import DEFAULT_PARALLEL_SLOTS, LocalEngine, engine_version
    from sagemeter.engines.waiting import wait_line
    from sagemeter.fidelity.vocabulary import gguf_vocabulary
    from sagemeter.inspect.predicted import facts_for_environment

    checkpoint = await asyncio.to_thread(resolve_checkpoint, target.checkpoint)
    engine = LocalEngine(
        checkpoint,
        parallel=max(DEFAULT_PARALLEL_SLOTS, concurrency),
        ctx_per_slot=slot_context(max_reply_tokens),
        log_path=log_path,
    )
    try:
        # Inside the try: a cancel or Ctrl-C while it loads must still stop the engine.
        told = on_wait
        await asyncio.to_thread(
            engine.start,
            on_wait=lambda seconds: (
                told(wait_line("starting", seconds, engine.log_path)) if told else None
            ),
        )
        summary = gguf_summary(checkpoint.path)
        environment = {
            "engine": "llama.cpp (embedded)",
            "engine_version": engine_version(),
            "model": checkpoint.description,
            "checkpoint_file": checkpoint.path.name,
            "checkpoint_sha256": await asyncio.to_thread(sha256_of, checkpoint.path),
            "checkpoint_bits_per_weight": summary["bits_per_weight"],
            "checkpoint_facts": await asyncio.to_thread(facts_for_environment, checkpoint.path),
        }
        assert engine.base_url is not None
        async with _chat_client(engine.base_url, wire, model=checkpoint.name) as client:
            yield Endpoint(
                target=target,
                backend="local",
                client=client,
                startup_facts=engine.startup_facts,
                environment=environment,
                http_root=engine.base_url,
                vocabulary=lambda: gguf_vocabulary(checkpoint.path),
            )
    finally:
        engine.stop()


@contextlib.asynccontextmanager
async def _sagemaker_endpoint(
    target: SageMakerTarget, concurrency: int, wire: WireOptions
) -> AsyncIterator[Endpoint]:
    from sagemeter import sagemaker as backend
    from sagemeter.transport.sagemaker import open_sagemaker_client

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
