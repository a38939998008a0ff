"""Why a local engine could not start, in words, from what it wrote in its log.

One table per engine of (pattern, meaning): the first pattern (in table order, most specific
first) found anywhere in the log gives the cause; `{port}`, `{file}` and `{model}` are filled in
by the engine. Without a match, the engine shows its log's most telling lines as they stand.
"""

from __future__ import annotations

import re

from sagemeter.errors import EngineError, InputError, SagemeterError
from sagemeter.transport.upstream import one_line

OUT_OF_MEMORY = "out of memory: the model and its KV cache do not fit"
PORT_IN_USE = "port {port} on 127.0.0.1 is already in use"
Causes = tuple[tuple[re.Pattern[str], str], ...]


def _table(*rows: tuple[str, str]) -> Causes:
    return tuple((re.compile(pattern), meaning) for pattern, meaning in rows)


LLAMACPP_CAUSES = _table(
    (r"couldn't bind HTTP server socket", PORT_IN_USE),
    (r"failed to allocate", OUT_OF_MEMORY),
    (r"out of memory", OUT_OF_MEMORY),
    (r"std::bad_alloc", OUT_OF_MEMORY),
    (r"invalid magic", "{file} is not a GGUF file llama.cpp can read"),
    (r"failed to read magic", "{file} is not a GGUF file llama.cpp can read"),
    (r"failed to load model", "llama.cpp could not load {file} (not a model it can run?)"),
)

VLLM_CAUSES = _table(
    # vLLM logs "Address already in use. Retrying with a new port." for its internal ports and
    # goes on: only the API server's own bind failure ([Errno 98]) stops it.
    (r"\[Errno 98\]|Address already in use(?!\. Retrying)", PORT_IN_USE),
    (
        r"No available memory for the cache blocks",
        "no memory is left for the KV cache once the model is loaded: free memory, or raise "
        "VLLM_CPU_KVCACHE_SPACE (CPU) or gpu_memory_utilization (GPU)",
    ),
    (
        r"is less than requested memory for kv",
        "VLLM_CPU_KVCACHE_SPACE asks for more memory than is free: lower it or free memory",
    ),
    (
        r"To serve at least one request with the model's max seq len",
        "the KV cache cannot hold one request of the longest context: lower --max-model-len "
        "or give the KV cache more memory",
    ),
    (r"CUDA out of memory|OutOfMemoryError", OUT_OF_MEMORY),
    (r"can't allocate memory|Cannot allocate memory|std::bad_alloc", OUT_OF_MEMORY),
    (
        r"Invalid repository ID or local directory specified"
        r"|is not a local folder and is not a valid model identifier"
        r"|Could not detect config format",
        "vLLM found no model at {model} (a folder with config.json, or a Hugging Face repo)",
    ),
    (
        r"Unrecognized model in|Should have a `model_type` key",
        "{model} has no valid model config (config.json names no model_type vLLM knows)",
    ),
)


def matched_cause(text: str, causes: Causes, **names: object) -> str | None:
    """The cause a table names for this log; None when no pattern is in it."""
    for pattern, meaning in causes:
        if pattern.search(text):
            return meaning.format(**names)
    return None


def failure_cause(text: str, causes: Causes, **names: object) -> str:
    """The cause a table names for this log, else its last error line, else its last line."""
    cause = matched_cause(text, causes, **names)
    if cause is not None:
        return cause
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if " E " in line or "error" in line.lower()]
    return one_line((errors or lines or ["its log is empty"])[-1])


def start_failed(message: str, cause: str) -> SagemeterError:
    """An engine that could not start: the engine's failure (exit 5), unless its cause is the
    user's to mend before anything runs, a port already in use (bad input, exit 2)."""
    in_use = PORT_IN_USE.split("{port}")
    if cause.startswith(in_use[0]) and in_use[1] in cause:
        return InputError(message)
    return EngineError(message)
