"""`decode_p10_tokens_per_second`: how fast the slowest tenth of replies decode.

A complete example of the `sagemeter.figures` entry-point group: one declaration (key, label,
unit, better direction, how `combine` compares it, where its row goes) and its computation from
the measurement's records. sagemeter's headline decode rate is the median-based differential;
this figure is the tail a user waiting on a slow reply sees.
"""

from __future__ import annotations

import numpy as np

from sagemeter.figures import Declared
from sagemeter.results.model import Detail

MIN_REPLIES = 3  # a percentile of fewer replies says nothing: no figure


def slowest_tenth(detail: Detail) -> float | None:
    """The 10th percentile, over the decode phase's complete long replies, of each reply's own
    decode rate: (token events − 1) / (last token event − first token event)."""
    decode = detail.decode
    if decode is None:
        return None
    rates = []
    for record in decode.records:
        complete = record.honoured_length and record.max_tokens == decode.long_tokens
        if not complete or record.events < 2:
            continue
        span_s = (record.arrivals_us[-1] - record.arrivals_us[0]) / 1e6
        if span_s > 0:
            rates.append((record.events - 1) / span_s)
    if len(rates) < MIN_REPLIES:
        return None
    return float(np.percentile(rates, 10))


SLOW_DECODE = Declared(
    key="decode_p10_tokens_per_second",
    label="Decode, slowest tenth of replies (tokens/s)",
    unit="tokens/s",
    compute_with=slowest_tenth,
    better="higher",
    compared="ratio",
    digits=3,
    speed=True,
    group="more",
)
