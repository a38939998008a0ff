"""Figures from records: steady window, throughput, TTFT, TPOT, ITL, concurrency, goodput.

Pure functions of the records (µs on the run's timeline), so a shard merge recomputes exactly
what one run would have. Definitions (docs/load.md repeats them):

* TTFT = first content event − send.
* TPOT = (last content event − first) / (tokens − 1): the first token is excluded.
* ITL = every gap between consecutive content events of a request (a per-gap distribution).
* decode rate = (tokens − 1) / (last − first), per request.
* tokens = the server's `usage.completion_tokens`, else the content events counted.
* Steady window, closed loop: from the instant the last stream finished its first request
  (every stream past ramp-up) to the instant the first stream finished its last one (drain
  starts). Both edges are request ends, so for streams in step the window spans whole cycles.
  Poisson: from the first arrival plus one median request time (concurrency has filled) to the
  last scheduled arrival (after it the load only drains).
* Throughput = output tokens whose content events arrived inside the window / its length (each
  event weighs usage / events of its request, so servers sending several tokens per event
  count right). Achieved concurrency = in-flight request-seconds inside the window / its length.
* Latency figures and goodput use the successful requests sent inside the window.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from sagemeter.evidence.distribution import Distribution, distribution
from sagemeter.loadgen.result import Goodput, TokenCheck, Window
from sagemeter.request_record import RequestRecord
from sagemeter.transport.token_check import answered, disagreement_note, usage_disagreements

US = 1e-6
Mode = Literal["closed", "poisson", "trace"]


@dataclass
class Figures:
    """Everything `summarize` measures; `notes` are data problems found on the way."""

    window: Window
    output_tokens_per_second: float
    ttft_s: Distribution
    tpot_s: Distribution
    itl_s: Distribution
    decode_tokens_per_second: Distribution
    achieved_concurrency: float
    requests_completed: int
    requests_failed: int
    requests_reopened: int
    reopen_lost_s: float
    output_tokens: int
    goodput: Goodput | None
    tokens: TokenCheck
    send_lag_kind: Literal["closed-loop gap", "late against schedule"]
    send_lag_s: Distribution
    mean_request_s: float | None
    notes: list[str] = field(default_factory=list)


def steady_window(records: Sequence[RequestRecord], mode: Mode) -> tuple[int, int, str, bool]:
    """(start µs, end µs, rule, steady?) — see the module docstring for the rule."""
    if not records:
        return 0, 0, "no requests", False
    if mode == "closed":
        by_stream: dict[int, list[RequestRecord]] = defaultdict(list)
        for record in records:
            by_stream[record.stream].append(record)
        firsts = [min(rs, key=lambda r: r.index).end_us for rs in by_stream.values()]
        lasts = [max(rs, key=lambda r: r.index).end_us for rs in by_stream.values()]
        start, end = max(firsts), min(lasts)
        rule = "last stream's first request ended → first stream's last request ended"
    else:
        scheduled = [r.scheduled_us for r in records if r.scheduled_us is not None]
        spans = sorted(r.end_us - r.send_us for r in records if r.ok)
        typical = spans[len(spans) // 2] if spans else 0
        start, end = min(scheduled, default=0) + typical, max(scheduled, default=0)
        rule = "first arrival + median request time → last scheduled arrival"
    if end > start:
        return start, end, rule, True
    whole_start = min(r.send_us for r in records)
    whole_end = max(r.end_us for r in records)
    return whole_start, whole_end, "whole run (no steady span: run longer)", False


def _weight(record: RequestRecord) -> float:
    if record.usage_tokens is not None and record.events:
        return record.usage_tokens / record.events
    return 1.0


def _send_lags(records: Sequence[RequestRecord], mode: Mode) -> list[float]:
    """The client's own delays, up to when it set out to send (`first_send_us`): the connect
    or lost send a server's closing of a connection costs is not counted as the client's lag."""
    if mode != "closed":
        return [
            (r.first_send_us - r.scheduled_us) * US for r in records if r.scheduled_us is not None
        ]
    by_stream: dict[int, list[RequestRecord]] = defaultdict(list)
    for record in records:
        by_stream[record.stream].append(record)
    gaps: list[float] = []
    for stream_records in by_stream.values():
        stream_records.sort(key=lambda r: r.index)
        for before, after in itertools.pairwise(stream_records):
            gaps.append((after.first_send_us - before.end_us) * US)
    return gaps


def _failures_note(failed: Sequence[RequestRecord]) -> str:
    reasons = Counter((r.error or "")[:160] for r in failed)
    common, count = reasons.most_common(1)[0]
    others = len(reasons) - 1
    tail = f" (and {others} other reason{'s' if others > 1 else ''})" if others else ""
    plural = "s" if len(failed) != 1 else ""
    return f"{len(failed)} request{plural} failed; {count}× {common}{tail}"


def _token_check(ok: Sequence[RequestRecord], max_tokens: int) -> tuple[TokenCheck, list[str]]:
    missing = [r for r in ok if r.usage_tokens is None]
    mismatch = usage_disagreements(ok)
    engine = [r for r in ok if r.engine_tokens is not None]
    engine_off = [r for r in engine if r.engine_tokens != r.tokens]
    short = [r for r in ok if r.tokens < (r.max_tokens or max_tokens)]  # each its own ask
    notes: list[str] = []
    if missing:
        notes.append(
            f"{len(missing)} of {len(ok)} replies carried no usage; their tokens are the content "
            "events counted"
        )
    if mismatch:
        notes.append(disagreement_note(mismatch, len(ok)))
    if engine_off:
        first = engine_off[0]
        notes.append(
            f"{len(engine_off)} of {len(engine)} replies: the engine's timings.predicted_n "
            f"({first.engine_tokens}) disagrees with usage ({first.tokens})"
        )
    if short:
        reasons = Counter(r.finish_reason or "none" for r in short)
        notes.append(
            f"{len(short)} of {len(ok)} replies stopped before the max_tokens asked "
            f"(finish_reason {dict(reasons)}): the server did not honour ignore_eos"
        )
    check = TokenCheck(
        requests=len(ok),
        usage_missing=len(missing),
        usage_vs_events_mismatch=len(mismatch),
        engine_reported=len(engine),
        engine_vs_usage_mismatch=len(engine_off),
        shorter_than_asked=len(short),
    )
    return check, notes


def summarize(
    records: Sequence[RequestRecord],
    mode: Mode,
    max_tokens: int,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
) -> Figures:
    """Every figure of one run (or of merged shards) from its records."""
    ok = answered(records)
    failed = [r for r in records if not r.ok]
    start, end, rule, steady = steady_window(records, mode)
    length_s = max(end - start, 1) * US

    window_tokens = 0.0
    in_flight_us = 0
    for record in records:
        in_flight_us += max(0, min(record.end_us, end) - max(record.send_us, start))
        if record.ok and record.arrivals_us:
            arrivals = record.arrivals_us
            inside = bisect.bisect_right(arrivals, end) - bisect.bisect_left(arrivals, start)
            window_tokens += inside * _weight(record)

    counted = [r for r in ok if start <= r.send_us <= end]
    ttft = [(r.arrivals_us[0] - r.send_us) * US for r in counted]
    tpot: list[float] = []
    decode: list[float] = []
    itl: list[float] = []
    for record in counted:
        arrivals = record.arrivals_us
        span_s = (arrivals[-1] - arrivals[0]) * US
        if record.tokens >= 2:
            tpot.append(span_s / (record.tokens - 1))
            if span_s > 0:
                decode.append((record.tokens - 1) / span_s)
        itl.extend((b - a) * US for a, b in itertools.pairwise(arrivals))

    token_check, notes = _token_check(ok, max_tokens)
    if failed:
        notes.insert(0, _failures_note(failed))
    goodput = _goodput(counted, length_s, slo_ttft_s, slo_tpot_s)
    spans = [(r.end_us - r.send_us) * US for r in ok]
    return Figures(
        window=Window(
            start_s=start * US,
            end_s=end * US,
            rule=rule,
            steady=steady,
            requests_counted=len(counted),
        ),
        output_tokens_per_second=window_tokens / length_s,
        ttft_s=distribution(ttft),
        tpot_s=distribution(tpot),
        itl_s=distribution(itl),
        decode_tokens_per_second=distribution(decode),
        achieved_concurrency=in_flight_us * US / length_s,
        requests_completed=len(ok),
        requests_failed=len(failed),
        requests_reopened=sum(1 for r in records if r.reopened),
        reopen_lost_s=math.fsum(r.reopen_lost_s for r in records),
        output_tokens=sum(r.tokens for r in ok),
        goodput=goodput,
        tokens=token_check,
        send_lag_kind="late against schedule" if mode != "closed" else "closed-loop gap",
        send_lag_s=distribution(_send_lags(records, mode)),
        mean_request_s=math.fsum(spans) / len(spans) if spans else None,
        notes=notes,
    )


def meets_slo(record: RequestRecord, slo_ttft_s: float | None, slo_tpot_s: float | None) -> bool:
    """TTFT ≤ its SLO and TPOT ≤ its SLO (an SLO not given always holds)."""
    arrivals = record.arrivals_us
    if slo_ttft_s is not None and (arrivals[0] - record.send_us) * US > slo_ttft_s:
        return False
    if slo_tpot_s is not None and record.tokens >= 2:
        tpot = (arrivals[-1] - arrivals[0]) * US / (record.tokens - 1)
        if tpot > slo_tpot_s:
            return False
    return True


def _goodput(
    counted: Sequence[RequestRecord],
    length_s: float,
    slo_ttft_s: float | None,
    slo_tpot_s: float | None,
) -> Goodput | None:
    if slo_ttft_s is None and slo_tpot_s is None:
        return None
    meeting = [r for r in counted if meets_slo(r, slo_ttft_s, slo_tpot_s)]
    return Goodput(
        slo_ttft_s=slo_ttft_s,
        slo_tpot_s=slo_tpot_s,
        requests_counted=len(counted),
        requests_meeting=len(meeting),
        share=len(meeting) / len(counted) if counted else None,
        requests_per_second=len(meeting) / length_s,
        tokens_per_second=sum(r.tokens for r in meeting) / length_s,
    )
