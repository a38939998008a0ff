"""What a test may accept on a busy host: a figure, or its honest absence for a reason that only a
busy host gives. Never a wrong number."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sagemeter.results import LoadLevel

# The rules that say the client itself could not keep up: on a machine shared with other work a
# run may honestly say so. Any other reason (concurrency short, a clock, a lost node) is a failure.
# pyproject.toml's `only_rerun` runs a test again when its failure names one (tests/test_reruns.py).
CLIENT_LIMITS = (
    "LOOP_LAG_P99_LIMIT_S",
    "WORKER_CPU_SHARE_MAX",
    "CLIENT_CPU_SHARE_MAX",
    "SEND_LAG_P99_LIMIT_S",
    "CLOSED_GAP_SHARE_MAX",
)


def names_a_client_limit(text: str | None) -> bool:
    return text is not None and any(rule in text for rule in CLIENT_LIMITS)


def only_client_limits(reasons: list[str]) -> bool:
    return bool(reasons) and all(names_a_client_limit(why) for why in reasons)


REASON_LINES = ("problem:", "incomplete:")  # how a command's output starts each reason line


def client_limits_named(text: str) -> list[str]:
    """The client rules `text` (a command's output) names, so a failure can say them; none when
    a reason line of the output names no client rule (something else went wrong too, which a
    rerun must not hide)."""
    reasons = [line for line in text.splitlines() if line.lstrip().startswith(REASON_LINES)]
    if reasons and not only_client_limits(reasons):
        return []
    return [rule for rule in CLIENT_LIMITS if rule in text]


# measure/agreement.py's stall rule: replies of one length that still disagree after the reruns
# leave no rate, and a level that truth orders against another and stayed so when run again has
# no figure; so do short replies (or prompts) that stayed as slow as the long ones, which truth
# orders; each reason ends "(a stall?)". measure/decode.py's client rule: a saturated client
# "may have set the pace". Not any reason that says "disagree": usage and content events that
# disagree are a server's or sagemeter's fault, never a busy host's.
STALL_REASONS = ("the client may have set the pace", "(a stall?)")


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
    assert_whole_or_busy(result)
    assert result["complete"] is False


def assert_whole_or_busy(result: dict[str, Any]) -> None:
    """A result (one arm of a plan) that is whole, or lacks figures only for a busy host's
    reasons."""
    if result["complete"] is not False:
        return
    reasons = result["incomplete_because"]
    assert reasons and all(any(why in r for why in STALL_REASONS) for r in reasons), reasons


def set_aside_by_a_busy_host(reason: str | None) -> bool:
    """A batch set aside for the client's own pace (its rule named) or by the stall rule: what a
    busy host adds to a clean server's level, measured again by `measure` itself."""
    return names_a_client_limit(reason) or (
        reason is not None and any(why in reason for why in STALL_REASONS)
    )


def counted_batches(level: LoadLevel) -> list[bool]:
    """Which of the level's batches counted, leaving out those the client's own rules set aside
    (a busy host's extra batches, each run again): a test's fault's own batches stay."""
    return [
        batch.complete
        for batch in level.batches
        if batch.complete or not names_a_client_limit(batch.reason)
    ]


def batch_reasons(level: LoadLevel) -> str:
    """The level's set-aside batches' reasons, for a failure's message: one that names a client
    rule runs the test again (pyproject.toml's `only_rerun`)."""
    return f"{level.concurrency} at once: {[b.reason for b in level.batches if not b.complete]}"
