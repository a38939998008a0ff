"""Start-up facts from a server's own log: weights, load time, KV cache, concurrency, quantization.

Two dialects: vLLM (as the AWS SageMaker container writes it to CloudWatch) and llama.cpp (as
the embedded engine writes it). Each parser takes the log text and returns what it could find;
a fact the log does not state stays None rather than being guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from sagemeter.results import StartupFacts

_MIB_PER_GIB = 1024.0

# vLLM: "Model loading took 9.75 GiB memory and 82.751806 seconds" (some: "took 9.75 GiB and")
_VLLM_LOADING = re.compile(
    r"Model loading took (?P<gib>[\d.]+) GiB(?: memory)? and (?P<seconds>[\d.]+) seconds"
)
_VLLM_KV = re.compile(r"GPU KV cache size: (?P<tokens>[\d,]+) tokens")
_VLLM_CONCURRENCY = re.compile(
    r"Maximum concurrency for (?P<per>[\d,]+) tokens per request: (?P<x>[\d.]+)x"
)
_VLLM_QUANT = re.compile(r"quantization=(?P<q>[\w.-]+)")

# llama.cpp: "load_tensors:   CPU_Mapped model buffer size =    92.10 MiB" (one line per device)
_LLAMA_WEIGHTS = re.compile(r"load_tensors:\s+\S+ model buffer size =\s+(?P<mib>[\d.]+) MiB")
_LLAMA_N_CTX = re.compile(r"llama_context: n_ctx\s+=\s+(?P<n>\d+)")
_LLAMA_SLOTS = re.compile(r"n_slots = (?P<slots>\d+), n_ctx_slot = (?P<per>\d+)")
_LLAMA_FILE_TYPE = re.compile(r"print_info: file type\s+=\s+(?P<type>.+?)\s*$")
# Log lines start with "M.SS.mmm.uuu" (minutes.seconds.milliseconds.microseconds since start).
_LLAMA_STAMP = re.compile(r"^(?P<m>\d+)\.(?P<s>\d+)\.(?P<ms>\d+)\.(?P<us>\d+) ")
_LLAMA_LOAD_BEGIN = "srv          init: loading model"
_LLAMA_LOAD_END = "srv          init: model loaded"


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def parse_vllm_log(lines: Iterable[str]) -> StartupFacts:
    """Facts from vLLM's start-up lines; the last occurrence wins (a restarted container)."""
    facts = StartupFacts(source="vllm log")
    for line in lines:
        if match := _VLLM_LOADING.search(line):
            facts.weights_gib = float(match["gib"])
            facts.load_seconds = float(match["seconds"])
        elif match := _VLLM_KV.search(line):
            facts.kv_cache_tokens = _int(match["tokens"])
        elif match := _VLLM_CONCURRENCY.search(line):
            facts.max_concurrency = float(match["x"])
            facts.max_concurrency_tokens_per_request = _int(match["per"])
        elif match := _VLLM_QUANT.search(line):
            value = match["q"].strip(",")
            if value != "None":
                facts.quantization = value
        else:
            continue
        facts.lines.append(line.strip())
    return facts


def _stamp_seconds(line: str) -> float | None:
    match = _LLAMA_STAMP.match(line)
    if not match:
        return None
    return int(match["m"]) * 60 + int(match["s"]) + int(match["ms"]) / 1e3 + int(match["us"]) / 1e6


def parse_llamacpp_log(lines: Iterable[str]) -> StartupFacts:
    """Facts from llama.cpp's server log (verbosity >= 4 prints the buffer sizes)."""
    facts = StartupFacts(source="llama.cpp log")
    weights_mib = 0.0
    load_begin: float | None = None
    for line in lines:
        if match := _LLAMA_WEIGHTS.search(line):
            weights_mib += float(match["mib"])
        elif match := _LLAMA_N_CTX.search(line):
            facts.kv_cache_tokens = int(match["n"])
        elif match := _LLAMA_SLOTS.search(line):
            facts.max_concurrency = float(match["slots"])
            facts.max_concurrency_tokens_per_request = int(match["per"])
        elif match := _LLAMA_FILE_TYPE.search(line):
            facts.quantization = match["type"]
        elif _LLAMA_LOAD_BEGIN in line:
            load_begin = _stamp_seconds(line)
        elif _LLAMA_LOAD_END in line:
            end = _stamp_seconds(line)
            if load_begin is not None and end is not None:
                facts.load_seconds = round(end - load_begin, 3)
        else:
            continue
        facts.lines.append(line.strip())
    if weights_mib:
        facts.weights_gib = round(weights_mib / _MIB_PER_GIB, 4)
    return facts
