"""Quality questions answered with a known share wrong, so a quality verdict has a known truth.

Off unless asked for (`--wrong-share`). Then a chat request whose last user message is the prompt
of a known question (every built-in set, plus `--questions FILE` sets) is answered with the
expected answer itself, or with `WRONG_REPLY`, which every scoring rule marks wrong. Which
questions are missed is decided by the question's id alone, never by arrival order:

- the **common share** p: a question is missed when u₁(id) < p, with u₁ a uniform number from a
  hash of the id. Two servers with p and p' > p miss nested sets: every question the first misses
  the second misses too, as two exports of one model that share their hard questions do;
- the **extra share** q, independent of the first: missed when u₂(id, seed) < q, with u₂ from a
  second hash salted by `--wrong-seed`. A server's total share missed is p + q − p·q.

So server A (p) against server B (p, q) is a true drop of q·(1 − p) with only losses, and two
servers with the same p and q but different seeds tie in truth while flipping about
2·q·(1 − q)·(1 − p) of the questions both ways: the noise a real re-run shows.

Requests that are not a known question are answered as before (`tok tok …`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sagemeter.questions import Question, QuestionSet

WRONG_REPLY = "I do not know."


def unit_hash(text: str) -> float:
    """A uniform number in [0, 1) from `text`: the same on every machine and every run."""
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _check_share(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} {value:g}: give a share from 0 to 1, e.g. 0.1")


@dataclass(frozen=True)
class WrongShares:
    """Which questions a server misses: the common share, the extra one, the extra's seed."""

    common: float = 0.0
    extra: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        _check_share("--wrong-share", self.common)
        _check_share("--wrong-share-extra", self.extra)

    def misses(self, question_id: str) -> bool:
        """Whether the server answers this question wrong."""
        if unit_hash(f"common:{question_id}") < self.common:
            return True
        return unit_hash(f"extra:{self.seed}:{question_id}") < self.extra

    @property
    def total(self) -> float:
        """The share of questions missed, in expectation."""
        return self.common + self.extra - self.common * self.extra

    def args(self) -> list[str]:
        """As flags of `python -m sagemeter.calibrate.server`."""
        return [
            f"--wrong-share={self.common!r}",
            f"--wrong-share-extra={self.extra!r}",
            f"--wrong-seed={self.seed}",
        ]


@dataclass
class KnownAnswers:
    """Prompt → question for every set the server knows, and the shares it misses."""

    shares: WrongShares
    by_prompt: dict[str, Question] = field(default_factory=dict)

    @classmethod
    def of(cls, shares: WrongShares, extra_sets: tuple[str, ...] = ()) -> KnownAnswers:
        """Every built-in set and the named files; a prompt in two sets keeps its first id.

        The question sets load here, not when the module does: a truth server answers them only
        when asked (`--wrong-share`), and their models are half of its start-up otherwise."""
        from sagemeter.questions import builtin_sets, load_question_set

        sets: list[QuestionSet] = [load_question_set(name) for name in builtin_sets()]
        sets += [load_question_set(spec) for spec in extra_sets]
        known = cls(shares)
        for question_set in sets:
            for question in question_set.questions:
                known.by_prompt.setdefault(question.prompt.strip(), question)
        return known

    def reply_for(self, body: dict[str, Any]) -> str | None:
        """The reply text to a known question (right or wrong), None for anything else."""
        question = self.by_prompt.get(_asked(body))
        if question is None:
            return None
        return WRONG_REPLY if self.shares.misses(question.id) else question.answer


def _asked(body: dict[str, Any]) -> str:
    """The last user message of a chat request (a completion's prompt), stripped."""
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                return content.strip() if isinstance(content, str) else ""
        return ""
    prompt = body.get("prompt")
    return prompt.strip() if isinstance(prompt, str) else ""
