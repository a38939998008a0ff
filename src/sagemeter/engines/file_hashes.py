"""SHA-256 of checkpoint files, remembered across commands in sagemeter's cache dir.

Hashing the 515 MB 32-bit file takes seconds; `checkpoints --prepare`, every `measure
local:smollm2-f32` and every demo arm would do it again. A file whose path, size and
modification time (nanoseconds) are unchanged is taken to hold the same bytes, as `make` and
`rsync` do; a file rewritten in place gets a new modification time and is hashed again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from pathlib import Path

from sagemeter.atomic import write_json_atomic
from sagemeter.paths import cache_dir

CACHE_FILE = "file-hashes.json"
CACHE_MAX_ENTRIES = 64


def sha256_of(path: Path) -> str:
    """SHA-256 of a file, remembered per (path, size, mtime) in this process and on disk."""
    stat = path.stat()
    return _sha256_cached(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


def _key(path: str, size: int, mtime_ns: int) -> str:
    return f"{path}|{size}|{mtime_ns}"


def _read_cache(file: Path) -> dict[str, str]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # missing or damaged: it only saves time, so start again
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


@functools.lru_cache(maxsize=16)
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    file = cache_dir() / CACHE_FILE
    known = _read_cache(file)
    key = _key(path, size, mtime_ns)
    if key in known:
        return known[key]
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()
    # Another version of the same file is stale now; keep the newest entries only.
    kept = {k: v for k, v in known.items() if not k.startswith(f"{path}|")}
    kept[key] = value
    with contextlib.suppress(OSError):  # a read-only cache dir costs time, not correctness
        write_json_atomic(file, dict(list(kept.items())[-CACHE_MAX_ENTRIES:]))
    return value
