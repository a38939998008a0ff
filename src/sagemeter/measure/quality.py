"""Answer quality: each question once, temperature 0, scored by the strict scorer (or, with the
article's method, by its rule: the expected answer anywhere in the reply).

A question whose request failed (after the wire's retries) is unanswered, not wrong: it is kept
with its error and left out of the score, which counts correct answers among answered questions.
"""

from __future__ import annotations

from itertools import zip_longest
from typing import Protocol

from sagemeter.measure import ProgressFn, no_progress
from sagemeter.measure.deadline import Deadline
from sagemeter.questions import Question, QuestionSet
from sagemeter.questions.scoring import ScoringRule
from sagemeter.results import QualityDetail, QualityItem, SequentialStop
from sagemeter.transport.chat import ChatClient, ChatRequest

TEMPERATURE = 0.0  # greedy: the same checkpoint gives the same answer
SEED = 0


class QualityLooks(Protocol):
    """A sequential stop's side for one arm (experiment/quality_stop.py)."""

    async def go_on(self, items: list[QualityItem]) -> bool:
        """Whether to ask the next question, the items answered so far given."""

    def is_look(self, answered: int) -> bool:
        """Whether a look is taken once `answered` questions are (a verdict may come there)."""

    def record(self) -> SequentialStop | None:
        """How the questions ended, kept in the result."""


def by_family_in_turn(questions: list[Question]) -> list[Question]:
    """The first question of every family, then every second, …: each block of a sequential
    run then holds every family, as the whole set does, not the first families only."""
    families: dict[str, list[Question]] = {}
    for question in questions:
        families.setdefault(question.family, []).append(question)
    rounds = zip_longest(*families.values())
    return [question for row in rounds for question in row if question is not None]


async def measure_quality(
    client: ChatClient,
    question_set: QuestionSet,
    *,
    max_tokens: int = 48,
    system_prompt: str | None = None,
    seed: int | None = SEED,
    scoring: ScoringRule = "strict",
    progress: ProgressFn = no_progress,
    looks: QualityLooks | None = None,
    deadline: Deadline | None = None,
) -> QualityDetail:
    """Ask one question at a time: batching can change greedy outputs on some engines.

    With `looks` (a sequential stop), the families are asked in turn and `looks` says after
    each answer whether to go on; only the questions asked are kept. Past `deadline` no
    question is asked: the rest are kept unanswered (not wrong), saying why."""
    items: list[QualityItem] = []
    questions = question_set.questions
    if looks is not None:
        questions = by_family_in_turn(questions)
    for position, question in enumerate(questions):
        if deadline is not None and (cut := deadline.passed("quality")):
            items += [
                QualityItem.scored(rest, None, scoring, error=f"not asked: {cut}")
                for rest in questions[position:]
            ]
            break
        record = await client.chat(
            ChatRequest(
                prompt=question.prompt,
                max_tokens=max_tokens,
                temperature=TEMPERATURE,
                seed=seed,
                stream=False,
                system_prompt=system_prompt,
            )
        )
        progress(1)
        items.append(
            QualityItem.scored(
                question,
                (record.text or "") if record.ok else None,
                scoring,
                finish_reason=record.finish_reason,
                error=record.error,
                retries=record.retries,
                reopened=record.reopened,
            )
        )
        if looks is not None and not await looks.go_on(items):
            break
    detail = QualityDetail.from_items(
        items,
        question_set=question_set.name,
        question_set_sha256=question_set.sha256,
        max_tokens=max_tokens,
        temperature=TEMPERATURE,
        seed=seed,
        scoring=scoring,
        system_prompt=system_prompt,
    )
    detail.sequential = looks.record() if looks is not None else None
    return detail
