"""Answer quality: each question once, temperature 0, scored by the strict scorer."""

from __future__ import annotations

from sagemeter.clients.base import ChatClient, ChatRequest
from sagemeter.measure import ProgressFn, no_progress
from sagemeter.questions import QuestionSet
from sagemeter.questions.scoring import score_reply
from sagemeter.results import QualityDetail, QualityItem

TEMPERATURE = 0.0  # greedy: the same checkpoint gives the same answer
SEED = 0


async def measure_quality(
    client: ChatClient,
    question_set: QuestionSet,
    *,
    max_tokens: int = 48,
    system_prompt: str | None = None,
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
                seed=SEED,
                stream=False,
                system_prompt=system_prompt,
            )
        )
        progress(1)
        correct, extracted = score_reply(question, record.text) if record.ok else (False, None)
        items.append(
            QualityItem(
                id=question.id,
                family=question.family,
                prompt=question.prompt,
                expected=question.answer,
                reply=record.text if record.ok else None,
                extracted=extracted,
                correct=correct,
                finish_reason=record.finish_reason,
                error=record.error,
            )
        )
    by_family: dict[str, dict[str, int]] = {}
    for item in items:
        counts = by_family.setdefault(item.family, {"correct": 0, "total": 0})
        counts["total"] += 1
        counts["correct"] += int(item.correct)
    return QualityDetail(
        question_set=question_set.name,
        question_set_sha256=question_set.sha256,
        max_tokens=max_tokens,
        temperature=TEMPERATURE,
        seed=SEED,
        system_prompt=system_prompt,
        correct=sum(item.correct for item in items),
        total=len(items),
        by_family=by_family,
        items=items,
    )
