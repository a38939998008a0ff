"""A `vllm:` target as an Endpoint: vLLM started for the measurement and stopped after it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from sagemeter.engines.endpoints import (
    Endpoint,
    WaitLineFn,
    WireOptions,
    chat_client,
    process_of,
    slot_context,
)
from sagemeter.engines.hf_export import export_record
from sagemeter.engines.vllm_server import (
    DEFAULT_MAX_MODEL_LEN,
    START_TIMEOUT_S,
    VllmServer,
    prepare_server,
)
from sagemeter.engines.waiting import wait_line
from sagemeter.fidelity.vocabulary import hf_vocabulary
from sagemeter.targets import VllmTarget


def max_model_len_for(max_reply_tokens: int, max_prompt_tokens: int = 0) -> int:
    """vLLM's context: the longest reply plus room for its prompt, at least 2,048 tokens."""
    return max(DEFAULT_MAX_MODEL_LEN, slot_context(max_reply_tokens, max_prompt_tokens))


def environment_of(server: VllmServer) -> dict[str, object]:
    """What sagemeter knows about the served checkpoint (the server adds its own version)."""
    model = server.model
    found: dict[str, object] = {
        "engine": f"vLLM (from {server.install.origin})",
        "model": model.description,
        "checkpoint_file": model.folder.name,
    }
    record = export_record(model.folder) if model.source is not None else None
    if record is not None:
        files = record.get("files")
        if isinstance(files, dict) and "model.safetensors" in files:
            found["checkpoint_file"] = f"{model.folder.name}/model.safetensors"
            found["checkpoint_sha256"] = files["model.safetensors"]
        found["checkpoint_bits_per_weight"] = 32.0
    return found


@contextlib.asynccontextmanager
async def open_vllm_endpoint(
    target: VllmTarget,
    max_reply_tokens: int,
    log_path: Path | None,
    wire: WireOptions,
    max_prompt_tokens: int = 0,
    on_wait: WaitLineFn | None = None,
    startup_timeout_s: float | None = None,
) -> AsyncIterator[Endpoint]:
    """Start vLLM for `target`, yield it as an Endpoint, and stop it whatever happens;
    `on_wait` is told the seconds spent and the log's last line while vLLM starts."""
    server = await asyncio.to_thread(
        prepare_server,
        target.checkpoint,
        log_path=log_path,
        max_model_len=max_model_len_for(max_reply_tokens, max_prompt_tokens),
    )
    try:
        # Inside the try: a cancel or Ctrl-C while vLLM compiles must still stop it.
        told = on_wait
        await asyncio.to_thread(
            server.start,
            startup_timeout_s or START_TIMEOUT_S,
            on_wait=lambda seconds: (
                told(wait_line("starting vLLM", seconds, server.log_path)) if told else None
            ),
        )
        assert server.base_url is not None
        async with chat_client(server.base_url, wire, model=server.model.name) as client:
            yield Endpoint(
                target=target,
                backend="vllm",
                client=client,
                startup_facts=server.startup_facts,
                environment=environment_of(server),
                http_root=server.base_url,
                vocabulary=lambda: hf_vocabulary(server.model.folder),
                tokenizer_path=server.model.folder,
                process=process_of(server),
            )
    finally:
        await asyncio.to_thread(server.stop)
