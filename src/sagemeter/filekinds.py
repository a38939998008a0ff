"""What a file sagemeter wrote holds, told from its top-level keys.

An output never replaces a result of another kind, even with --force: `sagemeter combine a.json
b.json a2.json` (OUT left out) would otherwise turn the measurement a.json into a comparison,
and `combine shard-0.json shard-1.json shard-2.json --force` the first shard into the merge.
Only JSON is recognised; anything else (a CSV, a log, a plan) has no kind here.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from sagemeter.textfiles import RESULTS_CAP

MEASURE = "a measure result"
LOAD = "a load result"
SHARD = "a load shard"
COMPARISON = "a comparison"
FIDELITY_RECORD = "a fidelity record"
FIDELITY_COMPARISON = "a fidelity comparison"
SELFCHECK = "a self-check"
JOURNAL = "a run journal"


def kind_of(payload: Any) -> str | None:
    """The kind of a parsed JSON file sagemeter writes, or None for anything else."""
    if not isinstance(payload, dict):
        return None
    keys = payload.keys()
    if payload.get("kind") == "sagemeter.load/1":
        shard = payload.get("shard")
        return SHARD if isinstance(shard, dict) and shard.get("index") is not None else LOAD
    if str(payload.get("schema", "")).startswith("sagemeter.fidelity/"):
        return FIDELITY_RECORD
    if {"decode_tokens_per_second", "load_tokens_per_second"} & keys or (
        isinstance(payload.get("endpoint"), dict) and isinstance(payload.get("decode"), dict)
    ):
        return MEASURE  # sagemeter's own result or one of the article's files
    if {"names", "files", "rows"} <= keys:
        return COMPARISON
    if {"a_model", "b_model", "agreement"} <= keys:
        return FIDELITY_COMPARISON
    if {"ttft_s", "itl_s", "levels"} <= keys:
        return SELFCHECK
    if {"steps", "plan", "run_dir"} <= keys:
        return JOURNAL
    return None


def kind_of_file(path: Path) -> str | None:
    """The kind of the regular file at `path` (never read through a link, a FIFO or a device),
    or None when it is none of sagemeter's files or cannot be read."""
    try:
        if not stat.S_ISREG(path.lstat().st_mode) or path.stat().st_size > RESULTS_CAP:
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as handle:
            if handle.read(64).lstrip()[:1] != b"{":
                return None  # not a JSON object: no need to read a big CSV or log whole
            handle.seek(0)
            return kind_of(json.loads(handle.read()))
    except (OSError, ValueError):
        return None
