"""`max_minutes`: the longest one arm's measurement may take, and the phase it cut.

A phase in progress ends at its next safe point once the time is up (no new decode pair, no new
parallel level, no new question), the phases after it are not run, and each cut is named in the
result ("quality: 12 of 40 questions unanswered (not asked: max_minutes 5 reached during
quality)"), so a result cut short says so and never looks complete.
"""

from __future__ import annotations

import time


class Deadline:
    """A time limit from now; `passed(phase)` names the cut once it is over."""

    def __init__(self, minutes: float) -> None:
        self.minutes = minutes
        self.at = time.monotonic() + minutes * 60.0

    def passed(self, phase: str) -> str | None:
        """None while there is time; else why `phase` is cut or not run."""
        if time.monotonic() < self.at:
            return None
        return f"max_minutes {self.minutes:g} reached during {phase}"
