"""The summaries a result carries beside its raw data, filled where a file lacks them.

A result measured now gets them when it is assembled; a file written before they existed (or one
of the source article's, which holds counts and batches only) gets them when it is read. So the
report and the terminal only render: every spread and interval they show is in the result.
"""

from __future__ import annotations

from sagemeter.evidence.binomial import wilson_interval
from sagemeter.evidence.distribution import spread
from sagemeter.results.model import MeasureResult, Share


def share(correct: int, total: int) -> Share | None:
    if total <= 0:
        return None
    low, high = wilson_interval(correct, total)
    return Share(correct=correct, total=total, low=low, high=high)


def fill_derived(result: MeasureResult) -> MeasureResult:
    """`result` with every missing summary computed from its own data (in place, returned)."""
    counts = result.quality_counts()
    if result.quality_interval is None and counts is not None:
        result.quality_interval = share(*counts)
    detail = result.detail
    if detail is None:
        return result
    decode = detail.decode
    if decode is not None:
        if decode.short_reply_s is None:
            decode.short_reply_s = spread(decode.short_times_s)
        if decode.long_reply_s is None:
            decode.long_reply_s = spread(decode.long_times_s)
    for level in detail.load.levels if detail.load else []:
        if level.batch_rates is None:
            level.batch_rates = spread([b.tokens_per_second for b in level.complete_batches])
    quality = detail.quality
    if quality is not None and not quality.family_accuracy:
        for family, count in quality.by_family.items():
            answered = count.get("answered", count.get("total", 0))
            found = share(count.get("correct", 0), answered)
            if found is not None:
                quality.family_accuracy[family] = found
    return result
