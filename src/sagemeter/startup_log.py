"""Start-up facts from a server's own log: weights, load time, KV cache, concurrency, quantization.

Three dialects, each as its engine prints it:
- vLLM, GPU and CPU builds, old and new wording: `Model loading took 9.75 GiB memory and 82.75
  seconds` (GPU); `Loading weights took 3.46 seconds` and `Checkpoint size: 0.50 GiB` (CPU, and
  newer GPU builds beside the first); `GPU KV cache size: 723,484 tokens` with `Maximum
  concurrency for 8,192 tokens per request: 88.32x` on the next line (older) or on the same line
  (vLLM 0.30 and later, and `CPU KV cache size: …` on the CPU build); `quantization=…`.
- llama.cpp's server: model buffer sizes, `n_ctx`, `n_slots`, the file type, the load time.
- SGLang: `Load weight end. [elapsed=23.18 s, ]… mem usage=28.79 GB.`, `KV Cache is allocated.
  #tokens: …`, `max_total_num_tokens=…, max_running_requests=…, context_len=…`.

One log can hold several start-ups (a container restarted, an endpoint name deployed again):
the newest one counts. A start-up begins at the engine's banner line; facts seen before the
newest banner are dropped. A fact the log does not state stays None rather than being guessed.
Every result says where its facts came from (`source`: the dialect and the log's origin).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sagemeter.results import StartupFacts

_MIB_PER_GIB = 1024.0

# --- vLLM -------------------------------------------------------------------------------------
_VLLM_LOADING = re.compile(
    r"Model loading took (?P<gib>[\d.]+) GiB(?: memory)? and (?P<seconds>[\d.]+) seconds"
)
_VLLM_WEIGHTS_TIME = re.compile(r"Loading weights took (?P<seconds>[\d.]+) seconds")
_VLLM_CHECKPOINT_SIZE = re.compile(r"Checkpoint size: (?P<gib>[\d.]+) GiB")
_VLLM_KV = re.compile(
    r"\b(?:GPU|CPU|XPU|TPU|HPU|NPU)[\w +]* KV cache size: (?P<tokens>[\d,]+) tokens"
)
_VLLM_CONCURRENCY = re.compile(
    r"Maximum concurrency for (?P<per>[\d,]+) tokens per request: (?P<x>[\d.]+)x"
)
_VLLM_QUANT = re.compile(r"quantization=(?P<q>[\w.-]+)")
_VLLM_BANNERS = (
    "vLLM API server version",
    "Initializing a V1 LLM engine",
    "Initializing an LLM engine",
)

# --- llama.cpp --------------------------------------------------------------------------------
# "load_tensors:   CPU_Mapped model buffer size =    92.10 MiB" (one line per device)
_LLAMA_WEIGHTS = re.compile(r"load_tensors:\s+\S+ model buffer size =\s+(?P<mib>[\d.]+) MiB")
_LLAMA_N_CTX = re.compile(r"llama_context: n_ctx\s+=\s+(?P<n>\d+)")
_LLAMA_SLOTS = re.compile(r"n_slots = (?P<slots>\d+), n_ctx_slot = (?P<per>\d+)")
_LLAMA_FILE_TYPE = re.compile(r"print_info: file type\s+=\s+(?P<type>.+?)\s*$")
# Log lines start with "M.SS.mmm.uuu" (minutes.seconds.milliseconds.microseconds since start).
_LLAMA_STAMP = re.compile(r"^(?P<m>\d+)\.(?P<s>\d+)\.(?P<ms>\d+)\.(?P<us>\d+) ")
_LLAMA_LOAD_BEGIN = "init: loading model"
_LLAMA_LOAD_END = "init: model loaded"
_LLAMA_BANNERS = ("init: loading model", "main: loading model", "build: ")

# --- SGLang -----------------------------------------------------------------------------------
_SGLANG_WEIGHTS = re.compile(
    r"Load weight end\.(?: elapsed=(?P<seconds>[\d.]+) s,)?.*?mem usage=(?P<gb>[\d.]+) GB"
)
_SGLANG_KV = re.compile(r"KV Cache is allocated\..*?#tokens: (?P<tokens>\d+)")
_SGLANG_LIMITS = re.compile(
    r"max_total_num_tokens=(?P<total>\d+).*?max_running_requests=(?P<running>\d+)"
    r"(?:.*?context_len=(?P<context>\d+))?"
)
_SGLANG_BANNERS = ("server_args=ServerArgs(", "Load weight begin.")


def _int(text: str) -> int:
    return int(text.replace(",", ""))


@dataclass
class _Reading:
    """Facts of one start-up while a log is read, and whether any line stated one."""

    facts: StartupFacts
    weights_mib: float = 0.0
    load_begin: float | None = None
    found: bool = False


LineParser = Callable[[str, _Reading], bool]


def _vllm_line(line: str, reading: _Reading) -> bool:
    facts, found = reading.facts, False
    if match := _VLLM_LOADING.search(line):
        facts.weights_gib = float(match["gib"])
        facts.load_seconds = float(match["seconds"])
        found = True
    if match := _VLLM_CHECKPOINT_SIZE.search(line):
        if facts.weights_gib is None:  # "Model loading took" (GPU memory) is the better figure
            facts.weights_gib = float(match["gib"])
        found = True
    if match := _VLLM_WEIGHTS_TIME.search(line):
        if facts.load_seconds is None:
            facts.load_seconds = float(match["seconds"])
        found = True
    if match := _VLLM_KV.search(line):
        facts.kv_cache_tokens = _int(match["tokens"])
        found = True
    if match := _VLLM_CONCURRENCY.search(line):
        facts.max_concurrency = float(match["x"])
        facts.max_concurrency_tokens_per_request = _int(match["per"])
        found = True
    if match := _VLLM_QUANT.search(line):
        value = match["q"].strip(",")
        if value != "None":
            facts.quantization = value
        found = True
    return found


def _stamp_seconds(line: str) -> float | None:
    match = _LLAMA_STAMP.match(line)
    if not match:
        return None
    return int(match["m"]) * 60 + int(match["s"]) + int(match["ms"]) / 1e3 + int(match["us"]) / 1e6


def _llamacpp_line(line: str, reading: _Reading) -> bool:
    facts = reading.facts
    if match := _LLAMA_WEIGHTS.search(line):
        reading.weights_mib += float(match["mib"])
        facts.weights_gib = round(reading.weights_mib / _MIB_PER_GIB, 4)
    elif match := _LLAMA_N_CTX.search(line):
        facts.kv_cache_tokens = int(match["n"])
    elif match := _LLAMA_SLOTS.search(line):
        facts.max_concurrency = float(match["slots"])
        facts.max_concurrency_tokens_per_request = int(match["per"])
    elif match := _LLAMA_FILE_TYPE.search(line):
        facts.quantization = match["type"]
    elif _LLAMA_LOAD_BEGIN in line:
        reading.load_begin = _stamp_seconds(line)
    elif _LLAMA_LOAD_END in line:
        end = _stamp_seconds(line)
        if reading.load_begin is not None and end is not None:
            facts.load_seconds = round(end - reading.load_begin, 3)
    else:
        return False
    return True


def _sglang_line(line: str, reading: _Reading) -> bool:
    facts = reading.facts
    if match := _SGLANG_WEIGHTS.search(line):
        facts.weights_gib = float(match["gb"])  # SGLang's "GB" is 2**30 bytes
        if match["seconds"]:
            facts.load_seconds = float(match["seconds"])
    elif match := _SGLANG_KV.search(line):
        facts.kv_cache_tokens = int(match["tokens"])
    elif match := _SGLANG_LIMITS.search(line):
        if facts.kv_cache_tokens is None:
            facts.kv_cache_tokens = int(match["total"])
        facts.max_concurrency = float(match["running"])
        if match["context"]:
            facts.max_concurrency_tokens_per_request = int(match["context"])
    elif match := _VLLM_QUANT.search(line):  # SGLang's ServerArgs(…, quantization=None, …)
        value = match["q"].strip(",")
        if value != "None":
            facts.quantization = value
        return True
    else:
        return False
    return True


@dataclass(frozen=True)
class _Dialect:
    name: str
    banners: tuple[str, ...]
    parse_line: LineParser


VLLM = _Dialect("vllm", _VLLM_BANNERS, _vllm_line)
LLAMACPP = _Dialect("llama.cpp", _LLAMA_BANNERS, _llamacpp_line)
SGLANG = _Dialect("sglang", _SGLANG_BANNERS, _sglang_line)


LONG_LINE = 300


def _excerpt(line: str) -> str:
    """A fact's line as kept in the result; vLLM's engine banner (thousands of characters) is
    cut to its start and its `quantization=` setting."""
    if len(line) <= LONG_LINE:
        return line
    at = line.find("quantization=")
    tail = f" … {line[at : at + 60].split(', ')[0]} …" if at >= 0 else " …"
    return line[:160] + tail


def _read(dialect: _Dialect, lines: Iterable[str], origin: str | None) -> StartupFacts:
    """The newest start-up's facts: a banner after facts were found begins a new start-up."""
    label = f"{dialect.name} log" + (f" ({origin})" if origin else "")
    reading = _Reading(StartupFacts(source=label))
    startups, counted = 0, False
    for raw in lines:
        line = raw.rstrip("\n")
        if any(banner in line for banner in dialect.banners):
            if reading.found:  # a banner after facts: a newer start-up begins here
                startups = max(startups, 1)  # the facts before it were one, banner or not
                reading, counted = _Reading(StartupFacts(source=label)), False
            if not counted:  # several banners before the first fact are one start-up
                startups, counted = startups + 1, True
        if dialect.parse_line(line, reading):
            reading.found = True
            reading.facts.lines.append(_excerpt(line.strip()))
    reading.facts.startups_in_log = startups or (1 if reading.found else None)
    return reading.facts


def parse_vllm_log(lines: Iterable[str], *, origin: str | None = None) -> StartupFacts:
    """Facts from vLLM's start-up lines (GPU or CPU build, any wording above)."""
    return _read(VLLM, lines, origin)


def parse_llamacpp_log(lines: Iterable[str], *, origin: str | None = None) -> StartupFacts:
    """Facts from llama.cpp's server log (verbosity >= 4 prints the buffer sizes)."""
    return _read(LLAMACPP, lines, origin)


def parse_sglang_log(lines: Iterable[str], *, origin: str | None = None) -> StartupFacts:
    """Facts from SGLang's start-up lines."""
    return _read(SGLANG, lines, origin)


def fact_count(facts: StartupFacts) -> int:
    """How many of the five facts a reading found."""
    values = (
        facts.weights_gib,
        facts.load_seconds,
        facts.kv_cache_tokens,
        facts.max_concurrency,
        facts.quantization,
    )
    return sum(value is not None for value in values)


def parse_startup_log(text: str, *, origin: str | None = None) -> StartupFacts:
    """Facts from a log of any of the three engines: the dialect that finds the most wins.

    A log none of them reads gives facts that are all None, with a source that says so.
    """
    lines = text.splitlines()
    readings = [
        parse(lines, origin=origin)
        for parse in (parse_vllm_log, parse_sglang_log, parse_llamacpp_log)
    ]
    best = max(readings, key=fact_count)  # ties: the first, vLLM
    if fact_count(best) == 0:
        where = f" ({origin})" if origin else ""
        return StartupFacts(source=f"log{where}: no start-up lines of vLLM, llama.cpp or SGLang")
    return best
