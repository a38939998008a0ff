"""What a test may accept on a busy host: a figure, or its honest absence for a reason that only a
busy host gives. Never a wrong number."""

from __future__ import annotations

from typing import Any

# measure/agreement.py: replies of one length that still disagree after the reruns leave no rate;
# a level that truth orders against another and stayed so when run again ends "(a stall?)".
STALL_REASONS = ("disagree", "the client may have set the pace", "(a stall?)")


def assert_decode_rate_or_busy(result: dict[str, Any]) -> None:
    """A measured decode rate, or none with the stall rule's or the client's own reason."""
    rate = result["decode_tokens_per_second"]
    if rate is not None:
        assert rate > 0, rate
        return
    reasons = result["incomplete_because"]
    assert any(why in reason for reason in reasons for why in STALL_REASONS), reasons


def assert_complete_or_busy(returncode: int, result: dict[str, Any]) -> None:
    """`measure` exited 0 with a whole result, or 3 only for reasons a busy host gives."""
    if returncode == 0:
        assert result["complete"] is not False, result["incomplete_because"]
        return
    assert returncode == 3, returncode
    reasons = result["incomplete_because"]
    assert reasons and all(any(why in r for why in STALL_REASONS) for r in reasons), reasons
