"""Checkpoint facts beside measured results: what a result's environment carries, and the
comparison row that puts the predicted decode ratio beside the measured one.
"""

from __future__ import annotations

import functools
from pathlib import Path

from sagemeter.errors import UserError
from sagemeter.inspect.build import checkpoint_facts
from sagemeter.paths import shown
from sagemeter.results.checkpoint_facts import CheckpointFacts

# Tokens per GB of weights read: the decode ceiling in tokens/s per GB/s of memory bandwidth.
# Its ratio between two results is the predicted decode ratio.
PREDICTED_KEY = "predicted_decode_tokens_per_gb"
PREDICTED_TITLE = "Predicted decode (tokens per GB read)"


def tokens_per_gb_read(facts: CheckpointFacts | None) -> float | None:
    """1e9 / bytes per decoded token, or None without facts."""
    if facts is None or facts.decode.bytes_per_token <= 0:
        return None
    return 1e9 / facts.decode.bytes_per_token


def facts_for_environment(path: Path) -> CheckpointFacts | None:
    """The facts a measurement records about its checkpoint file; None (never a failed
    measurement) when it cannot be read. Remembered per file version: reading a GGUF's
    vocabulary takes seconds, and an A-B-A run measures A twice."""
    try:
        stat = path.stat()
        facts = _facts_cached(str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    except (UserError, OSError):
        return None
    return facts.model_copy(
        deep=True, update={"source": shown(facts.source), "location": shown(facts.location)}
    )


@functools.lru_cache(maxsize=8)
def _facts_cached(path: str, size: int, mtime_ns: int) -> CheckpointFacts:
    return checkpoint_facts(path)
