"""Result files of schema version 1 read as version 2: their request records, converted.

Version 1 kept each request as seconds (`sent_at`, an absolute perf_counter reading, and
`first_token_s`, `chunk_arrivals_s`, `total_s` relative to it) with the engine's whole `timings`
block; version 2 keeps the transport's record (microseconds on one timeline). The conversion is
exact to the microsecond, so intervals and comparisons of old files come out as before.
"""

from __future__ import annotations

from typing import Any


def _us(seconds: float) -> int:
    return round(seconds * 1e6)


def record_from_v1(old: dict[str, Any], index: int) -> dict[str, Any]:
    """One version-1 request record as the transport record's fields."""
    send = _us(float(old.get("sent_at", 0.0)))
    found = old.get("engine_timings")
    timings: dict[str, Any] = found if isinstance(found, dict) else {}
    rate = timings.get("predicted_per_second")
    engine_tokens = timings.get("predicted_n")
    tokens = old.get("completion_tokens")
    return {
        "stream": 0,
        "index": index,
        "scheduled_us": None,
        "send_us": send,
        "end_us": send + _us(float(old.get("total_s", 0.0))),
        "arrivals_us": [send + _us(float(t)) for t in old.get("chunk_arrivals_s") or []],
        "usage_tokens": tokens if old.get("tokens_source") == "usage" else None,
        "engine_tokens": engine_tokens if isinstance(engine_tokens, int) else None,
        "finish_reason": old.get("finish_reason"),
        "done": bool(old.get("ok")),
        "error": None if old.get("ok") else (old.get("error") or "failed"),
        "engine_rate": float(rate) if isinstance(rate, int | float) else None,
        "max_tokens": old.get("max_tokens"),
        "text": old.get("text") or None,
    }


def upgrade_records(data: Any) -> Any:
    """A model's input with version-1 `records` converted (anything else passes through)."""
    if not isinstance(data, dict):
        return data
    records = data.get("records")
    if not isinstance(records, list) or not records:
        return data
    if not any(isinstance(r, dict) and "sent_at" in r for r in records):
        return data
    converted = [
        record_from_v1(r, index) if isinstance(r, dict) and "sent_at" in r else r
        for index, r in enumerate(records)
    ]
    return {**data, "records": converted}
