"""Answer quality: each question once, temperature 0, scored by the strict scorer (or, with the
article's method, by its rule: the expected answer anywhere in the reply).

A question whose request failed (after the wire's retries) is unanswered, not wrong: it is kept
with its error and left out of the score, which counts correct answers among answered questions.
"""

from __future__ import annotations

from sagemeter.measure import ProgressFn, no_progress
from sagemeter.questions import QuestionSet
from sagemeter.questions.scoring import ScoringRule
from sagemeter.results import QualityDetail, QualityItem
from sagemeter.transport.chat import ChatClient, ChatRequest

TEMPERATURE = 0.0  # greedy: the same checkpoint gives the same answer
SEED = 0


async def measure_quality(
    client: ChatClient,
    question_set: QuestionSet,
    *,
    max_tokens: int = 48,
    system_prompt: str | None = None,
    seed: int | None = SEED,
    scoring: ScoringRule = "strict",
    progress: ProgressFn = no_progress,
) -> QualityDetail:
    """Ask one question at a time: batching can change greedy outputs on some engines."""
    items: list[QualityItem] = []
    for question in question_set.questions:
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
    return QualityDetail.from_items(
        items,
        question_set=question_set.name,
        question_set_sha256=question_set.sha256,
        max_tokens=max_tokens,
        temperature=TEMPERATURE,
        seed=seed,
        scoring=scoring,
        system_prompt=system_prompt,
    )
