"""Matching two runs' answers question by question, so every statistic compares like with like.

Items are matched by id, never by position: a question set reordered or trimmed between runs
would otherwise pair different questions. Items present in only one run are kept aside and
reported, not silently dropped; so are items one run could not answer (its request failed):
an unanswered question is not a wrong answer, and it is left out of every paired figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from sagemeter.errors import UserError


class QualityItem(Protocol):
    """One question's answer as the statistics read it (a result file's quality item has these):
    a protocol, so the statistics stay below the result schema and import none of it."""

    @property
    def id(self) -> str: ...
    @property
    def family(self) -> str: ...
    @property
    def correct(self) -> bool: ...
    @property
    def reply(self) -> str | None: ...
    @property
    def extracted(self) -> str | None: ...
    @property
    def answered(self) -> bool: ...


class QualityDetail(Protocol):
    """A run's whole quality detail: its items."""

    @property
    def items(self) -> Sequence[QualityItem]: ...


Answers = Sequence[QualityItem] | QualityDetail
"""What every function here accepts for one run: its items, or the whole quality detail."""


def items_of(answers: Answers) -> list[QualityItem]:
    """The items of a run, whichever form it was given in."""
    return list(answers) if isinstance(answers, Sequence) else list(answers.items)


def _by_id(items: list[QualityItem], side: str) -> dict[str, QualityItem]:
    by_id: dict[str, QualityItem] = {}
    for item in items:
        if item.id in by_id:
            raise UserError(f"question id {item.id!r} appears twice in {side}; ids must be unique")
        by_id[item.id] = item
    return by_id


@dataclass(frozen=True)
class Pairs:
    """The items both runs answered, in the first run's order, and those set aside."""

    a: list[QualityItem]
    b: list[QualityItem]
    only_in_a: list[str]
    only_in_b: list[str]
    unanswered_a: list[str]
    unanswered_b: list[str]

    @property
    def unanswered(self) -> list[str]:
        """Questions both runs asked that one of them (or both) could not answer."""
        return list(dict.fromkeys([*self.unanswered_a, *self.unanswered_b]))

    @property
    def ids(self) -> list[str]:
        return [item.id for item in self.a]


def pair_items(a: Answers, b: Answers, names: tuple[str, str] = ("A", "B")) -> Pairs:
    """Match `a` and `b` by question id; no common question at all is a UserError.

    A question whose family differs between the runs is a different question under a reused
    id, so that is refused too rather than compared.
    """
    items_a, items_b = items_of(a), items_of(b)
    by_id_a = _by_id(items_a, names[0])
    by_id_b = _by_id(items_b, names[1])
    common = [item.id for item in items_a if item.id in by_id_b]
    if not common:
        raise UserError(
            f"{names[0]} and {names[1]} have no question id in common; "
            "compare runs of the same question set"
        )
    for item_id in common:
        family_a, family_b = by_id_a[item_id].family, by_id_b[item_id].family
        if family_a != family_b:
            raise UserError(
                f"question {item_id!r} is {family_a!r} in {names[0]} but {family_b!r} in "
                f"{names[1]}; compare runs of the same question set"
            )
    answered = [i for i in common if by_id_a[i].answered and by_id_b[i].answered]
    if not answered:
        raise UserError(
            f"no question was answered by both {names[0]} and {names[1]} (every request failed "
            "on one side); measure again"
        )
    return Pairs(
        a=[by_id_a[item_id] for item_id in answered],
        b=[by_id_b[item_id] for item_id in answered],
        only_in_a=[item.id for item in items_a if item.id not in by_id_b],
        only_in_b=[item.id for item in items_b if item.id not in by_id_a],
        unanswered_a=[i for i in common if not by_id_a[i].answered],
        unanswered_b=[i for i in common if not by_id_b[i].answered],
    )
