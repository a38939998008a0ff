"""The source article's own result files, read as sagemeter results.

The article's `compare.py` wrote one `measure-NAME.json` per endpoint: `endpoint` (name, region,
instance types, image digest), `started` / `finished`, `settings`, `load_facts` (strings as its
log regexes caught them, "723,484"), `decode` (medians of the reply times, the rate, the per-call
cost), `load` (every batch of every level, the level's figure the median of its batch rates),
`server_throughput_during_load`, and `quality` (counts and every answer by question id).

Read here, each part lands where sagemeter keeps its own: the answers become paired items of
`article-40` (prompt, expected answer, the article's verdict re-derived by its scoring rule), the
batches the repeats behind each level's interval, `load_facts` the start-up facts, the endpoint
the environment, and the settings the article's method (`settings.METHOD_SETTINGS["article"]`)
with the file's own counts and lengths. What the file does not hold stays empty: it keeps no
individual reply times, so its decode rate has no interval (the A-B-A drift is the check).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from sagemeter.errors import UserError
from sagemeter.questions import QuestionSet, load_question_set
from sagemeter.results.model import (
    Detail,
    Environment,
    FigureSummary,
    LoadBatch,
    LoadDetail,
    LoadLevel,
    MeasureResult,
    QualityDetail,
    QualityItem,
    StartupFacts,
)
from sagemeter.settings import MeasureSettings, with_method

ARTICLE_FORMAT = "article"
ARTICLE_QUESTIONS = "article-40"
ARTICLE_QUALITY_MAX_TOKENS = 64  # a constant of the article's compare.py, not in its files


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow")


class ArticleEndpoint(_Shape):
    name: str
    region: str | None = None
    instance_types: list[str] | None = None
    image_digest: str | None = None
    url: str | None = None


class ArticleSettings(_Shape):
    short: int
    long: int
    decode_repeats: int
    load_tokens: int
    concurrency: list[int]
    load_repeats: int
    temperature: float = 0.0


class ArticleDecode(_Shape):
    """The rate and per-call cost, beside `wall_SHORT_median`, `wall_LONG_median/min/max`."""

    decode_tokens_per_second: float | None = None
    per_call_fixed_cost_seconds: float | None = None
    samples_per_length: int | None = None


class ArticleBatch(_Shape):
    wall: float
    tokens: int
    tokens_per_second: float


class ArticleLevel(_Shape):
    aggregate_tokens_per_second_median: float | None = None
    batch_wall_seconds_median: float | None = None
    batches: list[ArticleBatch] = []


class ArticleQuality(_Shape):
    correct: int
    total: int
    by_kind: dict[str, dict[str, int]] = {}
    answers: dict[str, str] = {}


class ArticleFile(_Shape):
    endpoint: ArticleEndpoint
    started: str
    finished: str | None = None
    settings: ArticleSettings
    load_facts: dict[str, str | None] = {}
    load_facts_note: str | None = None
    decode: ArticleDecode
    load: dict[str, ArticleLevel] = {}
    quality: ArticleQuality | None = None


def is_article_shape(payload: dict[str, Any]) -> bool:
    """The article's files nest every figure; sagemeter's keep the article's figures on top."""
    return (
        isinstance(payload.get("endpoint"), dict)
        and isinstance(payload.get("decode"), dict)
        and "decode_tokens_per_second" not in payload
    )


def read_article_result(path: Path, payload: dict[str, Any]) -> MeasureResult:
    """One article file as a MeasureResult; a file of the wrong shape is one UserError."""
    try:
        article = ArticleFile.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise UserError(f"{path}: {where}: {first['msg']} (read as the article's shape)") from None
    warnings: list[str] = []
    if article.load_facts_note:
        warnings.append(f"start-up facts: {article.load_facts_note}")
    quality = _quality(article, warnings)
    load = _load(article)
    facts = _startup(article.load_facts)
    return MeasureResult(
        name=path.stem.removeprefix("measure-"),
        decode_tokens_per_second=article.decode.decode_tokens_per_second,
        per_call_fixed_cost_seconds=article.decode.per_call_fixed_cost_seconds,
        load_tokens_per_second={
            str(level.concurrency): level.tokens_per_second for level in load.levels
        },
        quality=_quality_text(article, quality),
        weights_gib=facts.weights_gib,
        kv_cache_tokens=facts.kv_cache_tokens,
        load_seconds=facts.load_seconds,
        intervals=_intervals(article, load),
        detail=Detail(
            settings=_settings(article, quality).model_dump(),
            environment=_environment(article),
            startup=facts,
            load=load,
            quality=quality,
            warnings=warnings,
            source_format=ARTICLE_FORMAT,
        ),
    )


def _settings(article: ArticleFile, quality: QualityDetail | None) -> MeasureSettings:
    """The article's method, with the counts and lengths its file records."""
    given = article.settings
    method = with_method(MeasureSettings(), "article")
    changes: dict[str, Any] = {
        "short_tokens": given.short,
        "long_tokens": given.long,
        "decode_repeats": given.decode_repeats,
        "load_levels": given.concurrency,
        "load_max_tokens": given.load_tokens,
        "load_batches": given.load_repeats,
    }
    if quality is not None:
        changes["questions"] = quality.question_set
    return MeasureSettings.model_validate({**method.model_dump(), **changes})


def _environment(article: ArticleFile) -> Environment:
    endpoint = article.endpoint
    version = article.load_facts.get("vllm_version")
    server: dict[str, Any] = {
        key: value
        for key, value in (
            ("image", endpoint.image_digest),
            ("url", endpoint.url),
            ("instance_types", endpoint.instance_types),
            ("region", endpoint.region),
        )
        if value
    }
    return Environment(
        target=f"{endpoint.name}@{endpoint.region}" if endpoint.region else endpoint.name,
        backend="sagemaker",
        engine="vllm" if version else None,
        engine_version=version,
        sagemeter_version="",  # the article's compare.py wrote it: see detail.source_format
        started_utc=article.started,
        ended_utc=article.finished,
        server=server,
    )


def _number(text: str | None) -> float | None:
    """A fact as the article's regex caught it ("723,484", "82.751806"); None when not found."""
    if text is None or text.strip() in ("", "None"):
        return None
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _startup(facts: dict[str, str | None]) -> StartupFacts:
    kv = _number(facts.get("kv_cache_tokens"))
    return StartupFacts(
        source="vllm (the article's load_facts)",
        weights_gib=_number(facts.get("weights_gib")),
        load_seconds=_number(facts.get("load_seconds")),
        kv_cache_tokens=None if kv is None else int(kv),
        max_concurrency=_number(facts.get("max_concurrency_at_max_len")),
        quantization=facts.get("quantization"),  # as vLLM logged it: "None" when unquantized
    )


def _load(article: ArticleFile) -> LoadDetail:
    """Every batch kept; the level's figure the article's own (the median of its batch rates)."""
    levels = []
    for key, level in sorted(article.load.items(), key=lambda item: int(item[0])):
        concurrency = int(key)
        levels.append(
            LoadLevel(
                concurrency=concurrency,
                tokens_per_second=level.aggregate_tokens_per_second_median,
                problem=None
                if level.aggregate_tokens_per_second_median is not None
                else "no figure: the article's file gives none for this level",
                batches=[
                    LoadBatch(
                        concurrency=concurrency,
                        wall_s=batch.wall,
                        output_tokens=batch.tokens,
                        failed=0,  # a failed call stopped the article's run; no batch lost one
                        tokens_per_second=batch.tokens_per_second,
                    )
                    for batch in level.batches
                ],
            )
        )
    return LoadDetail(
        max_tokens=article.settings.load_tokens,
        batches_per_level=article.settings.load_repeats,
        levels=levels,
    )


def _intervals(article: ArticleFile, load: LoadDetail) -> dict[str, FigureSummary]:
    """Each figure with its repeats' spread; the intervals themselves are `combine`'s."""
    summaries: dict[str, FigureSummary] = {}
    if article.decode.decode_tokens_per_second is not None:
        summaries["decode_tokens_per_second"] = FigureSummary(
            value=article.decode.decode_tokens_per_second,
            repeats=article.decode.samples_per_length or article.settings.decode_repeats,
        )
    for level in load.levels:
        rates = sorted(batch.tokens_per_second for batch in level.batches)
        if level.tokens_per_second is None or not rates:
            continue
        middle = len(rates) // 2
        median = rates[middle] if len(rates) % 2 else (rates[middle - 1] + rates[middle]) / 2
        summaries[f"load_c{level.concurrency}_tokens_per_second"] = FigureSummary(
            value=level.tokens_per_second,
            repeats=len(rates),
            min=rates[0],
            median=round(median, 3),
            max=rates[-1],
        )
    return summaries


def _quality(article: ArticleFile, warnings: list[str]) -> QualityDetail | None:
    """The answers as paired items of the article's 40, re-scored by the article's rule."""
    recorded = article.quality
    if recorded is None or not recorded.answers:
        return None
    question_set = load_question_set(ARTICLE_QUESTIONS)
    by_id = {question.id: question for question in question_set.questions}
    unknown = [qid for qid in recorded.answers if qid not in by_id]
    if unknown:
        warnings.append(
            f"quality: answers to questions that are not {ARTICLE_QUESTIONS}'s ({unknown[0]}, "
            "...): compared by their counts only"
        )
        return None
    items = [
        QualityItem.scored(question, recorded.answers[question.id], "article")
        for question in question_set.questions
        if question.id in recorded.answers
    ]
    detail = _quality_detail(question_set, items, article.settings.temperature)
    if (detail.correct, detail.total) != (recorded.correct, recorded.total):
        warnings.append(
            f"quality: the article's rule gives {detail.correct}/{detail.total} on these answers, "
            f"the file records {recorded.correct}/{recorded.total}"
        )
    return detail


def _quality_detail(
    question_set: QuestionSet, items: list[QualityItem], temperature: float
) -> QualityDetail:
    return QualityDetail.from_items(
        items,
        question_set=question_set.name,
        question_set_sha256=question_set.sha256,
        max_tokens=ARTICLE_QUALITY_MAX_TOKENS,
        temperature=temperature,
        seed=None,
        scoring="article",
    )


def _quality_text(article: ArticleFile, quality: QualityDetail | None) -> str | None:
    if quality is not None:
        return f"{quality.correct}/{quality.total}"
    if article.quality is None:
        return None
    return f"{article.quality.correct}/{article.quality.total}"
