"""`[stop] quality = "decided"`: both arms' questions in blocks, a sequential look after each.

With order = "interleaved" both arms are live and ask the same questions in turn. Each arm's
quality phase calls `go_on` after every answer; at a planned look (every `block` questions) it
waits until the other arm has answered as many, the sequential verdict is taken once on the
questions both answered (`sagemeter.evidence.sequential`), and both arms stop at a PASS or FAIL
or go on to the next block. The last look is at the end of the set. An arm whose measurement
ends early (an error, a stop) leaves: the other then asks the rest without looks, and the record
says so. An arm waiting at a look steps out of the turns, so the other (which may be a phase
behind: decode to a precision asks more pairs of one arm than of the other) is not held up.
"""

from __future__ import annotations

import asyncio

from sagemeter.evidence.sequential import SequentialLook, SequentialPlan, look_at
from sagemeter.experiment.turns import Turns
from sagemeter.results import QualityItem, SequentialStop


class QualityStop:
    """The looks both arms share; one per interleaved measure step."""

    def __init__(
        self,
        reference: str,
        candidate: str,
        max_items: int,
        block: int,
        margin_points: float,
        turns: Turns | None = None,
    ) -> None:
        self.turns = turns
        self.plan = SequentialPlan.of(max_items, block)
        self.margin_points = margin_points
        self.members = (reference, candidate)
        self._items: dict[str, list[QualityItem]] = {}
        self._arrived: dict[int, set[str]] = {}
        self._decided: dict[int, bool] = {}  # look index → go on
        self._changed = asyncio.Condition()
        self.last: SequentialLook | None = None
        self.last_index: int | None = None
        self.off: str | None = None  # why looks stopped being taken (an arm left)

    def arm(self, name: str) -> ArmLooks:
        """What arm `name`'s quality phase calls."""
        return ArmLooks(self, name)

    async def leave(self, name: str) -> None:
        """Arm `name` asks no more: the other is no longer waited for."""
        async with self._changed:
            pending = self.last is None or not self.last.stop
            if self.off is None and pending and name in self.members:
                self.off = f"arm {name!r} ended before the verdict; no look was taken after"
            self._changed.notify_all()

    async def go_on(self, name: str, items: list[QualityItem]) -> bool:
        """Whether arm `name`, having answered `items`, asks its next question."""
        self._items[name] = items
        count = len(items)
        if self.off is not None or count not in self.plan.looks:
            return True
        index = self.plan.looks.index(count)
        if self.turns is not None:
            await self.turns.step_aside(name)
        try:
            async with self._changed:
                arrived = self._arrived.setdefault(index, set())
                arrived.add(name)
                self._changed.notify_all()
                await self._changed.wait_for(
                    lambda: index in self._decided or self.off is not None or len(arrived) == 2
                )
                if self.off is not None:
                    return True
                if index not in self._decided:
                    self._decided[index] = self._look(index)
                return self._decided[index]
        finally:
            if self.turns is not None:
                await self.turns.come_back(name)

    def _look(self, index: int) -> bool:
        """Take look `index` on the questions both arms answered; True: go on."""
        reference, candidate = (self._items.get(name, []) for name in self.members)
        theirs = {item.id: item for item in candidate if item.answered}
        pairs = [
            (item, theirs[item.id]) for item in reference if item.answered and item.id in theirs
        ]
        last = index == len(self.plan.looks) - 1
        if not pairs:
            return not last
        look = look_at(
            self.plan,
            index,
            [a.correct for a, _ in pairs],
            [b.correct for _, b in pairs],
            [a.family for a, _ in pairs],
            self.margin_points,
        )
        self.last, self.last_index = look, index
        return not look.stop

    def record(self) -> SequentialStop | None:
        """How the questions ended, for both results; None before any look."""
        look, index = self.last, self.last_index
        if look is None or index is None:
            return None
        plan = self.plan
        stopped = look.stop and self.off is None
        reason = look.stopping_reason if stopped else (self.off or "no verdict yet")
        asked = max((len(items) for items in self._items.values()), default=0)
        return SequentialStop(
            method=plan.method,
            margin_points=self.margin_points,
            reference=self.members[0],
            candidate=self.members[1],
            max_items=plan.max_items,
            items_asked=plan.looks[index] if stopped else asked,
            items_paired=look.items,
            block=plan.block,
            looks_taken=look.look,
            looks_planned=len(plan.looks),
            boundaries_z=plan.boundaries_z,
            level=look.level,
            nominal_false_pass=plan.nominal_false_pass,
            nominal_false_fail=plan.nominal_false_fail,
            verdict=look.verdict if stopped else "INCONCLUSIVE",
            stopping_reason=reason,
        )


class ArmLooks:
    """One arm's side of `QualityStop` (what `measure_quality` takes as `looks`)."""

    def __init__(self, stop: QualityStop, name: str) -> None:
        self.stop = stop
        self.name = name

    async def go_on(self, items: list[QualityItem]) -> bool:
        return await self.stop.go_on(self.name, items)

    def is_look(self, answered: int) -> bool:
        return answered in self.stop.plan.looks

    def record(self) -> SequentialStop | None:
        return self.stop.record()
