"""The phase a change of server fell in: its figures are dropped, its records kept.

The identity is read at phase boundaries (measure/identity.py), so a change first seen at the
boundary after phase X happened during X or just after it: X's replies may be both servers'. Its
figures are dropped (null, the reason first in its problems), while its request records stay in
`detail` as evidence; the phases before X, whose closing check still saw the first server, keep
their figures, and the phases after X are not run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from sagemeter.measure.quality import QualityLooks
from sagemeter.results.model import (
    DecodeDetail,
    LoadDetail,
    LoadLevel,
    PrefillDetail,
    QualityItem,
    SequentialStop,
)
from sagemeter.results.server_identity import ServerIdentity

# The check a phase of levels awaits after each (the level's concurrency): the change, or None.
AfterLevel = Callable[[int], Awaitable[str | None]]
LEVEL = ": "  # a level's boundary label: `parallel: 4 at once`


def spanned_phase(identity: ServerIdentity | None) -> str | None:
    """The phase (or a phase's level: `parallel: 4 at once`) the change fell in: the one before
    the boundary where it was first seen (boundaries are kept as `before/after`, `before` for
    the closing check, a level's as its label). None when nothing spans it: no change, or a
    change first seen at a phase's end whose last level's own check still saw the first server
    (it came between the phases)."""
    if identity is None or identity.changed is None or not identity.checked:
        return None
    phase = identity.checked[-1].split("/")[0]
    before = identity.checked[-2] if len(identity.checked) > 1 else ""
    if LEVEL not in phase and before.startswith(phase + LEVEL):
        return None
    return phase


def spanned_text(phase: str) -> str:
    """`the decode phase`, or `parallel, 4 at once` for a level."""
    return phase.replace(LEVEL, ", ") if LEVEL in phase else f"the {phase} phase"


def level_label(phase: str, concurrency: int) -> tuple[str, str]:
    """A level's boundary label (`parallel: 4 at once`) and where it is in a reason."""
    return f"{phase}{LEVEL}{concurrency} at once", (
        f"during or after {concurrency} at once of the {phase} phase"
    )


def spanned_reason(changed: str) -> str:
    return f"dropped: measured across a change of server ({changed})"


def dropped_decode(decode: DecodeDetail, why: str) -> DecodeDetail:
    """Decode without figures: no rate, no per-call cost, no TTFT or inter-token latency."""
    return decode.model_copy(
        update={
            "valid": False,
            "problems": [why, *decode.problems],
            "tokens_per_second": None,
            "per_call_fixed_cost_s": None,
            "tokens_per_second_repeats": None,
            "tokens_per_second_ci95": None,
            "least_squares_tokens_per_second": None,
            "engine_tokens_per_second": None,
            "ttft_s": None,
            "inter_token_latency_s": None,
            "time_per_output_token_s": None,
        }
    )


def dropped_prefill(prefill: PrefillDetail, why: str) -> PrefillDetail:
    """Prefill without figures: no prompt rate, no long-prompt TTFT."""
    return prefill.model_copy(
        update={
            "valid": False,
            "problems": [why, *prefill.problems],
            "tokens_per_second": None,
            "tokens_per_second_ci95": None,
            "long_ttft": None,
        }
    )


def dropped_level(level: LoadLevel, why: str) -> LoadLevel:
    """A level without figures (its batches and records kept), saying why."""
    return level.model_copy(
        update={
            "tokens_per_second": None,
            "tokens_per_second_ci95": None,
            "batch_rates": None,
            "ttft_s": None,
            "counted_ttft_s": [],
            "inter_token_latency_s": None,
            "problem": why,
        }
    )


def dropped_load(load: LoadDetail, why: str) -> LoadDetail:
    """Every level without figures (its batches and records kept), saying why."""
    return load.model_copy(update={"levels": [dropped_level(level, why) for level in load.levels]})


class WatchedLooks:
    """A sequential stop's looks (measure/quality.py's QualityLooks) with the server's identity
    checked before each look: a verdict is never taken on answers of two servers. After a
    change the arm asks no more (the other arm goes on without looks, as when an arm ends)."""

    def __init__(self, looks: QualityLooks, check: Callable[[int], Awaitable[str | None]]) -> None:
        self.looks = looks
        self.check = check

    async def go_on(self, items: list[QualityItem]) -> bool:
        if self.looks.is_look(len(items)) and await self.check(len(items)):
            return False
        return await self.looks.go_on(items)

    def is_look(self, answered: int) -> bool:
        return self.looks.is_look(answered)

    def record(self) -> SequentialStop | None:
        return self.looks.record()
