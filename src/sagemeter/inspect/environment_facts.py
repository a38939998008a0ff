"""The facts a measurement records about its checkpoint file, read once per file version (the
result's `checkpoint`): apart from the predicted ratio (predicted.py), so the comparison and the
report, which need only that, do not load the checkpoint readers."""

from __future__ import annotations

import functools
from pathlib import Path

from sagemeter.errors import UserError
from sagemeter.inspect.build import checkpoint_facts
from sagemeter.paths import shown
from sagemeter.results.checkpoint_facts import CheckpointFacts


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
