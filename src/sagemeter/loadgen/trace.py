"""A request trace in the Mooncake JSONL format, read and checked before any work.

One JSON object per line: `timestamp` (ms from the trace's start), `input_length` and
`output_length` (tokens), and optionally `hash_ids`: prompt blocks of BLOCK_TOKENS tokens, the
same id the same block, so requests that share leading ids share that prefix. Lines may come in
any order (they are sorted by time); blank lines are skipped. Anything else (not JSON, a key
missing, a negative or fractional length) is one UserError naming the line.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagemeter.errors import UserError
from sagemeter.textfiles import TRACE_CAP, decode_utf8, read_capped

BLOCK_TOKENS = 512  # Mooncake's block: one hash id stands for this many prompt tokens
MAX_INPUT_TOKENS = 10_000_000
MAX_OUTPUT_TOKENS = 10_000_000


@dataclass(frozen=True)
class TraceRequest:
    """One request of a trace: when (seconds from the trace's start), how long in and out."""

    at_s: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Trace:
    path: str
    sha256: str
    requests: list[TraceRequest]

    @property
    def span_s(self) -> float:
        return self.requests[-1].at_s - self.requests[0].at_s if self.requests else 0.0


def _whole(line: str, entry: dict[str, Any], key: str, at_least: int, limit: int) -> int:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{line}: `{key}` must be a whole number, got {value!r}")
    if isinstance(value, float) and not value.is_integer():
        raise UserError(f"{line}: `{key}` must be a whole number, got {value!r}")
    if not at_least <= value <= limit:
        raise UserError(f"{line}: `{key}` {value!r} is out of {at_least}..{limit}")
    return int(value)


def _request(line: str, entry: Any) -> TraceRequest:
    if not isinstance(entry, dict):
        raise UserError(f"{line}: not a JSON object")
    missing = [key for key in ("timestamp", "input_length", "output_length") if key not in entry]
    if missing:
        raise UserError(f"{line}: missing {', '.join(missing)}")
    stamp = entry["timestamp"]
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not math.isfinite(stamp):
        raise UserError(f"{line}: `timestamp` must be a number of ms, got {stamp!r}")
    if stamp < 0:
        raise UserError(f"{line}: `timestamp` {stamp!r} is negative")
    inputs = _whole(line, entry, "input_length", 1, MAX_INPUT_TOKENS)
    outputs = _whole(line, entry, "output_length", 1, MAX_OUTPUT_TOKENS)
    ids = entry.get("hash_ids", [])
    if not isinstance(ids, list) or any(
        isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in ids
    ):
        raise UserError(f"{line}: `hash_ids` must be a list of whole numbers ≥ 0")
    return TraceRequest(stamp / 1000.0, inputs, outputs, tuple(ids))


def read_trace(path: Path) -> Trace:
    """The trace at `path`, sorted by time, or a UserError saying what is wrong and where."""
    data = read_capped(path, TRACE_CAP, "--trace")
    text = decode_utf8(path, data, "--trace")
    requests: list[TraceRequest] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw)
        except (ValueError, RecursionError):
            raise UserError(
                f"--trace {path} line {number}: not JSON (one JSON object per line expected)"
            ) from None
        requests.append(_request(f"--trace {path} line {number}", entry))
    if not requests:
        raise UserError(f"--trace {path}: holds no request")
    requests.sort(key=lambda request: request.at_s)
    start = requests[0].at_s
    shifted = [
        TraceRequest(r.at_s - start, r.input_tokens, r.output_tokens, r.hash_ids) for r in requests
    ]
    return Trace(str(path), hashlib.sha256(data).hexdigest(), shifted)


_CACHE: dict[tuple[str, int, int], Trace] = {}


def read_trace_cached(path: Path) -> Trace:
    """`read_trace`, read once per file version (settings are checked more than once a run)."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise UserError(f"--trace {path}: cannot read it ({exc.strerror or exc})") from None
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = read_trace(path)
    return _CACHE[key]
