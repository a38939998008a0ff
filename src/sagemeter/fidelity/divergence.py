"""KL(A‖B) at one position, estimated from two top-k lists.

The servers give only the k most likely tokens of each distribution, so the full KL cannot be
computed. The estimate works on A's top-k set S plus one tail bucket (every other token):

    p_t = exp(A's logprob of t)                        for t in S
    q_t = exp(B's logprob of t)   if t is in B's top-k
        = exp(B's k-th logprob)   otherwise (B's true value is at most that: an upper bound)
    p_tail = 1 − Σ p_t,   q_tail = 1 − Σ q_t
    KL ≈ Σ_S p_t·log(p_t / q_t) + p_tail·log(p_tail / q_tail)

Bias. When all of S is in B's top-k, this is the exact KL between the two distributions coarsened
to S + tail, hence a lower bound on the true KL (data-processing inequality): mass that A and B
place differently *inside* the tail is not seen. When some of S is missing from B's top-k, B's
probability for those tokens is taken at its largest possible value, the reading most favourable
to B for them, and the same mass is taken out of B's tail; the estimate is then no longer a bound
in either direction, but stays a proper KL (Σ q_t never exceeds B's own top-k mass, so q_tail ≥
B's true tail ≥ 0). The share of A's top-k tokens missing from B's top-k is reported beside it,
so a reader can see how much of the figure rests on that substitution. Logprobs must be over the
full vocabulary (both supported engines give that), not renormalised over the top k.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sagemeter.results.fidelity_record import TopToken

TAIL_FLOOR = 1e-12  # keeps log(p_tail / q_tail) finite when B's top-k hold (nearly) all its mass


@dataclass(frozen=True)
class PositionDivergence:
    """What one position says: do the top tokens agree, the KL estimate, and how many of A's
    top-k tokens B's top-k lacked."""

    agree: bool
    kl: float
    missing: int
    compared: int


def position_divergence(a_top: list[TopToken], b_top: list[TopToken], k: int) -> PositionDivergence:
    """Compare A's and B's top-k (each most likely first) over their first `k` entries."""
    a_list, b_list = a_top[:k], b_top[:k]
    if not a_list or not b_list:
        raise ValueError("both positions need at least one top-k entry")
    b_logprob = {token.id: token.logprob for token in b_list}
    b_floor = min(b_logprob.values())
    kl = 0.0
    p_sum = q_sum = 0.0
    missing = 0
    for token in a_list:
        p = math.exp(token.logprob)
        if token.id in b_logprob:
            q_log = b_logprob[token.id]
        else:
            q_log = b_floor
            missing += 1
        q = math.exp(q_log)
        p_sum += p
        q_sum += q
        if p > 0.0:
            kl += p * (token.logprob - q_log)
    p_tail = max(0.0, 1.0 - p_sum)
    q_tail = max(TAIL_FLOOR, 1.0 - q_sum)
    if p_tail > 0.0:
        kl += p_tail * math.log(p_tail / q_tail)
    return PositionDivergence(
        agree=a_list[0].id == b_list[0].id,
        kl=max(0.0, kl),
        missing=missing,
        compared=len(a_list),
    )
