"""Request records of known timing, built the way the transport freezes them (µs from send)."""

from __future__ import annotations

from sagemeter.request_record import RequestRecord


def timed_record(
    tokens: int,
    seconds: float,
    *,
    asked: int | None = None,
    ok: bool = True,
    first_token_s: float = 0.05,
    send_s: float = 0.0,
) -> RequestRecord:
    """A streamed reply of `tokens` tokens taking `seconds`, its first token at `first_token_s`
    and the rest evenly spread to the end (or a failed request when not `ok`)."""
    send = round(send_s * 1e6)
    end = send + round(seconds * 1e6)
    arrivals: list[int] = []
    if ok and tokens:
        first = send + round(first_token_s * 1e6)
        step = (end - first) / max(1, tokens)
        arrivals = [first + round(step * k) for k in range(tokens)]
    return RequestRecord(
        stream=0,
        index=0,
        scheduled_us=None,
        send_us=send,
        end_us=end,
        arrivals_us=arrivals,
        usage_tokens=tokens if ok else None,
        engine_tokens=None,
        finish_reason="length" if ok else None,
        done=ok,
        error=None if ok else "HTTP 500",
        max_tokens=asked or tokens,
    )
