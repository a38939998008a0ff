"""sagemeter's own engines as registry entries: `local:` (the embedded llama.cpp) and `vllm:`.

Each entry only points at the code that already runs that engine; `cmd:` lives in `command`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

from sagemeter.engine_registry import Engine, Served, ServeWords, StartRequest
from sagemeter.engines.checkpoints import gguf_summary, resolve_checkpoint
from sagemeter.engines.endpoints import (
    Endpoint,
    WireOptions,
    chat_client,
    process_of,
    slot_context,
)
from sagemeter.engines.file_hashes import sha256_of
from sagemeter.engines.llamacpp import (
    DEFAULT_PARALLEL_SLOTS,
    MAX_SLOTS,
    START_TIMEOUT_S,
    LocalEngine,
    engine_threads,
    engine_version,
)
from sagemeter.engines.sources import local_source, vllm_source
from sagemeter.engines.vllm_endpoint import max_model_len_for, open_vllm_endpoint
from sagemeter.engines.vllm_server import START_TIMEOUT_S as VLLM_START_TIMEOUT_S
from sagemeter.engines.vllm_server import VllmServer, check_vllm_target, prepare_server
from sagemeter.engines.waiting import wait_line
from sagemeter.fidelity.vocabulary import gguf_vocabulary
from sagemeter.inspect.environment_facts import facts_for_environment
from sagemeter.inspect.hub import HubSource
from sagemeter.inspect.sources import LocalSource
from sagemeter.targets import EngineTarget, LocalTarget, VllmTarget, parse_target

VLLM_STARTING = "starting vLLM (it compiles the model first)"


@contextlib.asynccontextmanager
async def local_endpoint(
    target: LocalTarget,
    concurrency: int,
    max_reply_tokens: int,
    log_path: Path | None,
    wire: WireOptions,
    on_wait: Callable[[str], None],
    startup_timeout_s: float | None = None,
) -> AsyncIterator[Endpoint]:
    checkpoint = await asyncio.to_thread(resolve_checkpoint, target.checkpoint)
    engine = LocalEngine(
        checkpoint,
        parallel=max(DEFAULT_PARALLEL_SLOTS, concurrency),
        ctx_per_slot=slot_context(max_reply_tokens),
        log_path=log_path,
    )
    try:
        # Inside the try: a cancel or Ctrl-C while it loads must still stop the engine.
        await asyncio.to_thread(
            engine.start,
            startup_timeout_s or START_TIMEOUT_S,
            on_wait=lambda seconds: on_wait(wait_line("starting", seconds, engine.log_path)),
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
        async with chat_client(engine.base_url, wire, model=checkpoint.name) as client:
            yield Endpoint(
                target=target,
                backend="local",
                client=client,
                startup_facts=engine.startup_facts,
                environment=environment,
                http_root=engine.base_url,
                vocabulary=lambda: gguf_vocabulary(checkpoint.path),
                tokenizer_path=checkpoint.path,
                process=process_of(engine),
            )
    finally:
        engine.stop()


class LocalEngineEntry:
    """`local:CHECKPOINT`: the embedded llama.cpp engine on a checkpoint sagemeter ships."""

    name = "local"
    form = "local:CHECKPOINT"
    start_seconds = 10.0  # loading a checkpoint into the embedded engine
    runs_commands = False

    def parse(self, spec: str, text: str) -> EngineTarget:
        parsed = parse_target(f"local:{spec}")
        assert isinstance(parsed, LocalTarget)
        return parsed

    def check(self, target: EngineTarget) -> None:
        assert isinstance(target, LocalTarget)
        engine_threads()  # a bad SAGEMETER_LLAMA_THREADS is one line before anything starts
        resolve_checkpoint(target.checkpoint, derive=False)

    def source(self, spec: str, text: str) -> LocalSource | HubSource:
        return local_source(spec, text)

    def endpoint(
        self, target: EngineTarget, request: StartRequest
    ) -> contextlib.AbstractAsyncContextManager[Endpoint]:
        assert isinstance(target, LocalTarget)
        return local_endpoint(
            target,
            request.concurrency,
            request.max_reply_tokens,
            request.log_path,
            request.wire or WireOptions(),
            request.on_wait,
            request.startup_timeout_s,
        )

    @contextlib.contextmanager
    def serving(self, target: EngineTarget, request: StartRequest) -> Iterator[Served]:
        """`request.slots` slots (`serve --parallel`), else a slot per stream (16 at least,
        MAX_SLOTS at most); `request.ctx_per_slot` tokens each, else measure's context."""
        assert isinstance(target, LocalTarget)
        checkpoint = resolve_checkpoint(target.checkpoint)
        engine = LocalEngine(
            checkpoint,
            parallel=request.slots
            or max(DEFAULT_PARALLEL_SLOTS, min(request.concurrency, MAX_SLOTS)),
            ctx_per_slot=request.ctx_per_slot or slot_context(request.max_reply_tokens),
            port=request.port,
            log_path=request.log_path,
        )
        what = f"starting {checkpoint.name}"
        request.on_status(what)
        try:  # stopped on any exit, also while it starts
            engine.start(
                request.startup_timeout_s or START_TIMEOUT_S,
                on_wait=lambda s: request.on_wait(wait_line(what, s, engine.log_path)),
            )
            yield engine
        finally:
            engine.stop()

    def serve_words(self, target: EngineTarget, served: Served) -> ServeWords:
        assert isinstance(served, LocalEngine)
        return ServeWords(
            served.checkpoint.name,
            f"(OpenAI-compatible; {served.parallel} slots of {served.ctx_per_slot:,} tokens)",
            died="the engine stopped unexpectedly",
        )


class VllmEngineEntry:
    """`vllm:CHECKPOINT`: a real `vllm serve` (its CPU build, or one the user points at)."""

    name = "vllm"
    form = "vllm:CHECKPOINT"
    # `vllm serve` on the CPU build, start to ready: 97-127 s measured on 2 cores (docs/vllm.md).
    start_seconds = 140.0
    runs_commands = False

    def parse(self, spec: str, text: str) -> EngineTarget:
        parsed = parse_target(f"vllm:{spec}")
        assert isinstance(parsed, VllmTarget)
        return parsed

    def check(self, target: EngineTarget) -> None:
        assert isinstance(target, VllmTarget)
        check_vllm_target(target.checkpoint)

    def source(self, spec: str, text: str) -> LocalSource | HubSource:
        return vllm_source(spec, text)

    def endpoint(
        self, target: EngineTarget, request: StartRequest
    ) -> contextlib.AbstractAsyncContextManager[Endpoint]:
        assert isinstance(target, VllmTarget)
        return open_vllm_endpoint(
            target,
            request.max_reply_tokens,
            request.log_path,
            request.wire or WireOptions(),
            request.max_prompt_tokens,
            request.on_wait,
            request.startup_timeout_s,
        )

    @contextlib.contextmanager
    def serving(self, target: EngineTarget, request: StartRequest) -> Iterator[Served]:
        """vLLM's own checkpoint folder first (exported once, then cached), then `vllm serve`."""
        assert isinstance(target, VllmTarget)
        request.on_status(f"preparing {target.checkpoint} for vLLM (exported once, then cached)")
        server = prepare_server(
            target.checkpoint,
            log_path=request.log_path,
            port=request.port,
            max_model_len=max_model_len_for(request.max_reply_tokens, request.max_prompt_tokens),
        )
        request.on_status(VLLM_STARTING)
        try:  # stopped on any exit, also while it starts
            server.start(
                request.startup_timeout_s or VLLM_START_TIMEOUT_S,
                on_wait=lambda s: request.on_wait(wait_line(VLLM_STARTING, s, server.log_path)),
            )
            yield server
        finally:
            server.stop()

    def serve_words(self, target: EngineTarget, served: Served) -> ServeWords:
        assert isinstance(served, VllmServer)
        return ServeWords(
            served.model.name,
            "(vLLM, OpenAI-compatible)",
            log_label="vLLM log",
            died="vLLM stopped unexpectedly",
        )


LOCAL: Engine = LocalEngineEntry()
VLLM: Engine = VllmEngineEntry()
