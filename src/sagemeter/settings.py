"""Every knob of a measurement, with the source article's counts and lengths as defaults.

The settings used are written into each result, so two results can be checked for comparability.

Two methods (`method`): ours (`sagemeter`, the default) and the source article's (`article`),
which differs from ours in a few named settings (`METHOD_SETTINGS`): one prompt for every
request, a 64-token cap on answers, no seed, a level's figure the median of its batch rates, a
12 s pause after every batch, its scoring rule, and no warm-up request. `with_method` sets them;
explicit settings given after it still win, and the result records what was used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sagemeter.bounds import (
    MAX_BATCHES,
    MAX_LEVELS,
    MAX_MINUTES,
    MAX_QUESTIONS,
    MAX_REPEATS,
    MAX_SEED,
    MAX_TOKENS,
    MAX_WAIT_S,
)
from sagemeter.errors import UserError
from sagemeter.limits import check_levels, parse_levels
from sagemeter.questions.scoring import ScoringRule

Method = Literal["sagemeter", "article"]
METHODS: tuple[Method, ...] = get_args(Method)
LoadStatistic = Literal["pooled", "median"]

# The one prompt the article's compare.py sent for every fixed-length request (decode, parallel).
ARTICLE_STORY = "Write a long, detailed story about a lighthouse keeper on a remote island."


class MeasureSettings(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False)  # `--margin nan` says "finite", not "<= 100"

    method: Method = Field(
        "sagemeter", description="whose method: ours, or the source article's (see METHOD_SETTINGS)"
    )
    short_tokens: int = Field(
        16, gt=0, le=MAX_TOKENS, description="decode: length of the short replies"
    )
    long_tokens: int = Field(
        512, gt=1, le=MAX_TOKENS, description="decode: length of the long replies"
    )
    decode_repeats: int = Field(
        5, gt=0, le=MAX_REPEATS, description="decode: replies of each length"
    )
    decode_warmup: int = Field(
        1, ge=0, le=MAX_REPEATS, description="decode: unmeasured requests sent first"
    )
    decode_prompt: str | None = Field(
        None, description="decode: the prompt of every reply (None: the built-in story prompt)"
    )
    prefill_tokens: list[int] = Field(
        default_factory=lambda: [256, 4096],
        max_length=2,
        description="prefill: the short and the long prompt's length in the server's tokens "
        "(empty: the phase is not run; the article's method runs none)",
    )
    tokenizer: str | None = Field(
        None,
        description="prefill: a GGUF file or a Hugging Face folder whose tokenizer counts the "
        "prompts of a server that gives no usage.prompt_tokens (None: the checkpoint's own "
        "where sagemeter started it)",
    )
    long_prompt_levels: list[int] = Field(
        default_factory=list,
        max_length=MAX_LEVELS,
        description="long prompts under load: requests at once, each with its own prompt of the "
        "prefill phase's long length (empty: not run; it needs the prefill phase)",
    )
    load_levels: list[int] = Field(
        default_factory=lambda: [1, 4, 16], min_length=1, max_length=MAX_LEVELS
    )
    load_max_tokens: int = Field(256, gt=0, le=MAX_TOKENS, description="parallel: tokens per reply")
    load_batches: int = Field(2, gt=0, le=MAX_BATCHES, description="parallel: batches per level")
    load_prompt: str | None = Field(
        None,
        description="parallel: one prompt for every request (None: eight story topics in turn)",
    )
    load_statistic: LoadStatistic = Field(
        "pooled",
        description="parallel: a level's figure, all tokens / all wall time of its batches "
        "(pooled) or the median of its batches' own rates (median, the article's)",
    )
    batch_pause_s: float = Field(
        0.0,
        ge=0,
        le=3600,
        description="parallel: seconds to wait after every batch (the article: 12, so that "
        "vLLM's stats line, written every 10 s, closes on each batch)",
    )
    questions: str = Field("article-40", description="built-in question set or a JSONL path")
    questions_per_family: int | None = Field(
        None, gt=0, le=MAX_QUESTIONS, description="use only the first N questions of each family"
    )
    quality_max_tokens: int = Field(48, gt=0, le=MAX_TOKENS)
    quality_seed: int | None = Field(
        0,
        ge=-MAX_SEED - 1,
        le=MAX_SEED,
        description="quality: the `seed` sent with every question (None: none sent)",
    )
    scoring: ScoringRule = Field(
        "strict", description="quality: the scoring rule (strict | article)"
    )
    margin_points: float = Field(
        2.0,
        gt=0,
        le=100,
        description="quality: the largest accuracy drop that still passes, declared before the run",
    )
    fidelity_prompts: int = Field(
        0,
        ge=0,
        le=MAX_QUESTIONS,
        description="token-level fidelity: prompts forced along (0 = not measured)",
    )
    fidelity_top_k: int = Field(5, gt=0, le=20, description="fidelity: logprobs per position")
    fidelity_max_tokens: int = Field(
        16, gt=0, le=MAX_TOKENS, description="fidelity: answer tokens per prompt"
    )
    system_prompt: str | None = None
    timeout_s: float = Field(
        120.0, gt=0, le=MAX_WAIT_S, description="the longest one request may take, every try alike"
    )
    startup_timeout_s: float | None = Field(
        None,
        gt=0,
        le=MAX_WAIT_S,
        description="a server sagemeter starts (local:, vllm:, cmd:): the longest wait for it to "
        "answer (None: the engine's own, cmd: 600 s)",
    )
    stall_s: float = Field(
        30.0,
        gt=0,
        le=MAX_WAIT_S,
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
    metrics_wait_s: float = Field(
        180.0,
        ge=0,
        le=3600,
        description="SageMaker targets: the longest wait, once measuring is done, for the "
        "endpoint's CloudWatch metrics of every phase's minutes (0: read what is there)",
    )
    speed_precision: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="decode pairs past decode_repeats, and each level's batches past "
        "load_batches, until the figure's 95% interval's half-width is within this share of it "
        "(0.03: 3%), up to speed_max_repeats pairs and speed_max_batches batches (None: the "
        "fixed counts)",
    )
    speed_max_repeats: int = Field(
        20, gt=0, le=MAX_REPEATS, description="decode: the most pairs a precision target may ask"
    )
    speed_max_batches: int = Field(
        6,
        gt=0,
        le=MAX_BATCHES,
        description="parallel: the most complete batches per level a precision target may ask",
    )
    max_minutes: float | None = Field(
        None,
        gt=0,
        le=MAX_MINUTES,
        description="the longest one arm's measurement may take: the phase in progress is cut "
        "there and the rest not run, each named in the result (None: no limit)",
    )
    quick: bool = False

    @property
    def max_concurrency(self) -> int:
        return max([*self.load_levels, *self.long_prompt_levels])

    @property
    def max_prompt_tokens(self) -> int:
        """The longest prompt the measurement sends on purpose (0: only short ones)."""
        return max(self.prefill_tokens, default=0)

    @property
    def max_reply_tokens(self) -> int:
        return max(self.long_tokens, self.load_max_tokens, self.quality_max_tokens)


# What each method sets; every other setting is the same for both.
METHOD_SETTINGS: dict[Method, dict[str, Any]] = {
    "sagemeter": {
        "prefill_tokens": [256, 4096],
        "long_prompt_levels": [],
        "decode_warmup": 1,
        "decode_prompt": None,
        "load_prompt": None,
        "load_statistic": "pooled",
        "batch_pause_s": 0.0,
        "quality_max_tokens": 48,
        "quality_seed": 0,
        "scoring": "strict",
    },
    "article": {
        "prefill_tokens": [],  # the article measured no prefill
        "long_prompt_levels": [],  # nor long prompts under load
        "decode_warmup": 0,
        "decode_prompt": ARTICLE_STORY,
        "load_prompt": ARTICLE_STORY,
        "load_statistic": "median",
        "batch_pause_s": 12.0,
        "quality_max_tokens": 64,
        "quality_seed": None,
        "scoring": "article",
    },
}


def with_method(settings: MeasureSettings, method: Method) -> MeasureSettings:
    """`settings` measured by `method`: its named settings replaced, every other kept."""
    return MeasureSettings.model_validate(
        {**settings.model_dump(), **METHOD_SETTINGS[method], "method": method}
    )


def quick_settings() -> MeasureSettings:
    """Everything shrunk for smoke tests: seconds, not minutes, on the embedded engine."""
    return MeasureSettings(
        short_tokens=4,
        long_tokens=48,  # far enough from the short replies to stay above the noise
        decode_repeats=2,
        decode_warmup=1,
        # No prefill phase: a 1,000-token prompt takes ~30 s on a 2-core laptop's embedded
        # engine, which a smoke test cannot afford; --prefill-tokens adds it.
        prefill_tokens=[],
        load_levels=[1, 4],
        load_max_tokens=16,
        load_batches=1,
        questions_per_family=2,
        quality_max_tokens=24,
        metrics_wait_s=0.0,  # a smoke test reads CloudWatch as it is; --metrics-wait waits
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
        prefill_tokens=[],  # the article's method measured no prefill
        load_levels=[1, 4, 16],
        load_max_tokens=32,
        load_batches=2,
        quality_max_tokens=16,
        fidelity_prompts=8,  # B and A' forced along A's answers to the first 8 questions
    )


# How every face takes settings: they differ only in how a setting is spelled (`--long-tokens`
# on the command line, `measure.long_tokens` in a plan, `long_tokens` over MCP), so messages
# take a `label` that turns a settings field into the face's spelling. Each spelling is the
# options model's (`sagemeter.options.measure.MEASURE.label(face)`); without one, a message
# names the settings field itself.

Label = Callable[[str], str]


def measure_settings(
    quick: bool,
    overrides: Mapping[str, Any],
    *,
    method: str | None = None,
    label: Label = str,
) -> MeasureSettings:
    """The default settings (or the quick ones), measured by `method` (ours when None), with the
    given fields changed, validated.

    `overrides` maps MeasureSettings fields to values; None means "keep the default".
    """
    base = quick_settings() if quick else MeasureSettings()
    if method is not None and method != base.method:
        chosen = next((known for known in METHODS if known == method), None)
        if chosen is None:
            raise UserError(f"{label('method')} {method!r}: give one of {', '.join(METHODS)}")
        base = with_method(base, chosen)
    return settings_with(base, overrides, label=label)


def settings_with(
    base: MeasureSettings, overrides: Mapping[str, Any], *, label: Label = str
) -> MeasureSettings:
    """`base` with the given fields changed (None keeps the base value), validated."""
    changes = {key: value for key, value in overrides.items() if value is not None}
    try:
        settings = MeasureSettings.model_validate({**base.model_dump(), **changes})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UserError(f"{label(str(first['loc'][0]))}: {first['msg']}") from None
    if settings.long_tokens <= settings.short_tokens:
        raise UserError(f"{label('long_tokens')} must be larger than {label('short_tokens')}")
    check_levels(settings.load_levels, label("load_levels"))
    check_prefill_tokens(settings.prefill_tokens, label("prefill_tokens"))
    if settings.long_prompt_levels:
        check_levels(settings.long_prompt_levels, label("long_prompt_levels"))
        if not settings.prefill_tokens:
            raise UserError(
                f"{label('long_prompt_levels')} sends the prefill phase's long prompt: give "
                f"{label('prefill_tokens')} too (the quick settings and the article's method run "
                "no prefill phase)"
            )
    for most, least in (
        ("speed_max_repeats", "decode_repeats"),
        ("speed_max_batches", "load_batches"),
    ):
        if settings.speed_precision is not None and getattr(settings, most) < getattr(
            settings, least
        ):
            raise UserError(
                f"{label(most)} {getattr(settings, most)} is below {label(least)} "
                f"{getattr(settings, least)}: the maximum of repeats cannot be below the minimum"
            )
    return settings


def parse_levels_or_none(text: str, label: str) -> list[int]:
    """`1,4,16` → [1, 4, 16]; `none`, `off` or `0` → [] (not run)."""
    return parse_levels(text, label, allow_none=True)


PREFILL_MIN_TOKENS = 16
PREFILL_MAX_TOKENS = MAX_TOKENS
_PREFILL_OFF = frozenset({"", "0", "none", "off"})


def parse_prefill_tokens(text: str, label: str = "--prefill-tokens") -> list[int]:
    """`256,4096` → [256, 4096]; `none`, `off` or `0` → [] (the phase is not run)."""
    if text.strip().lower() in _PREFILL_OFF:
        return []
    try:
        lengths = [int(part) for part in text.split(",")]
    except ValueError:
        raise UserError(
            f"{label} {text!r}: give two prompt lengths in tokens, short first (e.g. 256,4096), "
            "or none"
        ) from None
    check_prefill_tokens(lengths, label)
    return lengths


def check_prefill_tokens(lengths: list[int], label: str = "--prefill-tokens") -> None:
    """Two lengths, the short first, each from PREFILL_MIN_TOKENS to PREFILL_MAX_TOKENS; or none."""
    if not lengths:
        return
    shown = ",".join(map(str, lengths))
    if len(lengths) != 2:
        raise UserError(f"{label} {shown}: give exactly two lengths, short first (e.g. 256,4096)")
    if lengths[0] >= lengths[1]:
        raise UserError(f"{label} {shown}: the short length comes first and must be the smaller")
    if not all(PREFILL_MIN_TOKENS <= length <= PREFILL_MAX_TOKENS for length in lengths):
        raise UserError(
            f"{label} {shown}: each length must be from {PREFILL_MIN_TOKENS} to "
            f"{PREFILL_MAX_TOKENS:,} tokens"
        )
