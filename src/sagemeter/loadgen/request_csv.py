"""`load --csv FILE`: one row per request, from the same records `--raw` keeps in the result.

For a spreadsheet or pandas: times in seconds since the run's start (exact to the µs the
records hold), a failed request's figures left empty (a failed request is never a figure) with
its error beside it. A sweep writes every level's requests, each row naming its level; a search
writes the requests of the operating point's probe (the run the result's figures are of).
The file is written whole or not at all.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from sagemeter.atomic import write_text_atomic
from sagemeter.loadgen.build import record_from_raw
from sagemeter.loadgen.result import LoadResult
from sagemeter.request_record import RequestRecord

COLUMNS = (
    "concurrency",
    "rate",
    "stream",
    "index",
    "scheduled_s",
    "send_s",
    "ttft_s",
    "end_s",
    "output_tokens",
    "prompt_tokens",
    "status",
    "error",
)
US = 1e-6


def _seconds(us: int | None) -> str:
    return "" if us is None else f"{us * US:.6f}"


def _runs(result: LoadResult) -> list[LoadResult]:
    return result.levels or [result]


def request_rows(result: LoadResult) -> list[dict[str, str]]:
    """Every request of the result's run(s) with raw records, in sending order per run."""
    rows: list[dict[str, str]] = []
    for run in _runs(result):
        if run.raw is None:
            continue
        records = sorted((record_from_raw(raw) for raw in run.raw.records), key=_send_order)
        for record in records:
            first = record.arrivals_us[0] if record.arrivals_us else None
            rows.append(
                {
                    "concurrency": ""
                    if run.asked_concurrency is None
                    else str(run.asked_concurrency),
                    "rate": "" if run.asked_rate is None else f"{run.asked_rate:g}",
                    "stream": str(record.stream),
                    "index": str(record.index),
                    "scheduled_s": _seconds(record.scheduled_us),
                    "send_s": _seconds(record.send_us),
                    "ttft_s": _seconds(first - record.send_us) if record.ok and first else "",
                    "end_s": _seconds(record.end_us),
                    "output_tokens": str(record.tokens) if record.ok else "",
                    "prompt_tokens": ""
                    if record.prompt_tokens is None
                    else str(record.prompt_tokens),
                    "status": "ok" if record.ok else "failed",
                    "error": "" if record.ok else (record.error or "no complete reply"),
                }
            )
    return rows


def _send_order(record: RequestRecord) -> tuple[int, int, int]:
    return record.send_us, record.stream, record.index


def write_request_csv(path: Path, result: LoadResult) -> int:
    """Write the CSV atomically; returns the number of request rows."""
    rows = request_rows(result)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(path, buffer.getvalue())
    return len(rows)


def without_raw(result: LoadResult) -> LoadResult:
    """The result as a run without `--raw` writes it: the records taken for the CSV dropped."""
    levels = None if result.levels is None else [without_raw(level) for level in result.levels]
    return result.model_copy(
        update={
            "raw": None,
            "levels": levels,
            "settings": result.settings.model_copy(update={"raw": False}),
        }
    )
