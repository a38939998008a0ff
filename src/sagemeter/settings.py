"""Every knob of a measurement, with the source article's values as defaults.

The settings used are written into each result, so two results can be checked for comparability.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class MeasureSettings(BaseModel):
    short_tokens: int = Field(16, gt=0, description="decode: length of the short replies")
    long_tokens: int = Field(512, gt=1, description="decode: length of the long replies")
    decode_repeats: int = Field(5, gt=0, description="decode: replies of each length")
    decode_warmup: int = Field(1, ge=0, description="decode: unmeasured requests sent first")
    load_levels: list[int] = Field(default_factory=lambda: [1, 4, 16], min_length=1)
    load_max_tokens: int = Field(256, gt=0, description="parallel: tokens per reply")
    load_batches: int = Field(2, gt=0, description="parallel: batches per level")
    questions: str = Field("article-40", description="built-in question set or a JSONL path")
    questions_per_family: int | None = Field(
        None, gt=0, description="use only the first N questions of each family"
    )
    quality_max_tokens: int = Field(48, gt=0)
    margin_points: float = Field(
        2.0,
        gt=0,
        le=100,
        description="quality: the largest accuracy drop that still passes, declared before the run",
    )
    fidelity_prompts: int = Field(
        0, ge=0, description="token-level fidelity: prompts forced along (0 = not measured)"
    )
    fidelity_top_k: int = Field(5, gt=0, le=20, description="fidelity: logprobs per position")
    fidelity_max_tokens: int = Field(16, gt=0, description="fidelity: answer tokens per prompt")
    system_prompt: str | None = None
    timeout_s: float = Field(
        120.0, gt=0, le=86400, description="the longest one request may take, every try alike"
    )
    stall_s: float = Field(
        30.0,
        gt=0,
        le=86400,
        description="once tokens flow, the longest silence before a reply counts as stalled",
    )
    retries: int = Field(
        3, ge=0, le=20, description="tries sent again after a transient failure (429, 5xx, reset)"
    )
    batch_reruns: int = Field(
        2,
        ge=0,
        le=20,
        description="parallel: extra batches run per level to replace ones that do not count",
    )
    quick: bool = False

    @property
    def max_concurrency(self) -> int:
        return max(self.load_levels)

    @property
    def max_reply_tokens(self) -> int:
        return max(self.long_tokens, self.load_max_tokens, self.quality_max_tokens)


def quick_settings() -> MeasureSettings:
    """Everything shrunk for smoke tests: seconds, not minutes, on the embedded engine."""
    return MeasureSettings(
        short_tokens=4,
        long_tokens=48,  # far enough from the short replies to stay above the noise
        decode_repeats=2,
        decode_warmup=1,
        load_levels=[1, 4],
        load_max_tokens=16,
        load_batches=1,
        questions_per_family=2,
        quality_max_tokens=24,
        quick=True,
    )


def demo_settings() -> MeasureSettings:
    """The article's method at lengths a 2-core laptop runs three times in about five minutes.

    Counts stay the article's (five replies per length, two batches per level, 40 questions);
    only lengths shrink. Correct answers to the 40 questions fit in 16 tokens.
    """
    return MeasureSettings(
        short_tokens=16,
        long_tokens=96,
        decode_repeats=5,
        load_levels=[1, 4, 16],
        load_max_tokens=32,
        load_batches=2,
        quality_max_tokens=16,
        fidelity_prompts=8,  # B and A' forced along A's answers to the first 8 questions
    )
