"""The sequential stop's looks and the interleaved turns together: an arm a phase behind (more
decode pairs asked of it) is not held up by an arm waiting at a look, and both stop at the same
look."""

from __future__ import annotations

import asyncio

from sagemeter.experiment.quality_stop import QualityStop
from sagemeter.experiment.turns import Turns
from sagemeter.results import QualityItem

QUESTIONS = 200


def _item(index: int, correct: bool) -> QualityItem:
    return QualityItem(
        id=f"q{index}", family=f"f{index % 10}", prompt="p", expected="1", correct=correct
    )


async def _arm(
    name: str, turns: Turns, stop: QualityStop, extra_turns: int, wrong_every: int
) -> list[QualityItem]:
    for _ in range(extra_turns):  # a decode that asked more pairs of this arm
        async with turns.turn(name):
            await asyncio.sleep(0)
    looks = stop.arm(name)
    items: list[QualityItem] = []
    for index in range(QUESTIONS):
        async with turns.turn(name):
            await asyncio.sleep(0)
        items.append(_item(index, wrong_every == 0 or index % wrong_every != 0))
        if not await looks.go_on(items):
            break
    await stop.leave(name)
    await turns.leave(name)
    return items


def test_an_arm_a_phase_behind_is_not_held_up_and_both_stop_together() -> None:
    async def run() -> tuple[list[QualityItem], list[QualityItem]]:
        turns = Turns(["a", "b"])
        stop = QualityStop("a", "b", QUESTIONS, 20, 5.0, turns)
        both = asyncio.gather(
            _arm("a", turns, stop, extra_turns=0, wrong_every=0),
            _arm("b", turns, stop, extra_turns=7, wrong_every=3),  # B misses a third
        )
        a, b = await asyncio.wait_for(both, timeout=30)
        record = stop.record()
        assert record is not None and record.verdict == "FAIL"
        assert len(a) == len(b) == record.items_asked < QUESTIONS
        return a, b

    asyncio.run(run())


def test_an_arm_that_leaves_lets_the_other_finish_without_looks() -> None:
    async def run() -> None:
        turns = Turns(["a", "b"])
        stop = QualityStop("a", "b", QUESTIONS, 20, 5.0, turns)

        async def gone() -> list[QualityItem]:
            await stop.leave("b")  # B's measurement failed before its questions
            await turns.leave("b")
            return []

        a, _ = await asyncio.wait_for(
            asyncio.gather(_arm("a", turns, stop, 0, 0), gone()), timeout=30
        )
        assert len(a) == QUESTIONS
        assert stop.record() is None  # no look was ever taken

    asyncio.run(run())
