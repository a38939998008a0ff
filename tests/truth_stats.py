"""What the known-truth server (`sagemeter calibrate-server`) has counted, read from its /stats."""

from __future__ import annotations

import json
import urllib.request


def truth_stats(url: str) -> dict[str, float]:
    """The server's counters (requests, generation requests, connections …) at `url`."""
    with urllib.request.urlopen(f"{url}/stats", timeout=5) as answer:
        stats: dict[str, float] = json.loads(answer.read())
    return stats


def truth_requests(url: str) -> int:
    """Every request the server has taken so far."""
    return int(truth_stats(url)["requests"])
