"""`measure`'s options, declared once: the command line's flags, a plan's `[measure]` and
`[stop]` tables and the MCP tool `measure_endpoint`'s arguments are all made from these fields.

A field's name is the plan key and, with `-` for `_`, the flag (`load_tokens`, `--load-tokens`);
`Opt` names the settings field it sets and the MCP argument where those differ; its bounds and
help are the field's own; its default is the settings' (`sagemeter.settings`), shown by each face.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field

from sagemeter.bounds import (
    MAX_BATCHES,
    MAX_LEVELS,
    MAX_MINUTES,
    MAX_QUESTIONS,
    MAX_REPEATS,
    MAX_TOKENS,
    MAX_WAIT_S,
)
from sagemeter.errors import UserError
from sagemeter.limits import check_levels, parse_levels
from sagemeter.options.base import Face, Opt, OptionsModel, Text
from sagemeter.options.command import Command, Variant
from sagemeter.settings import (
    MeasureSettings,
    Method,
    check_prefill_tokens,
    measure_settings,
    parse_levels_or_none,
    parse_prefill_tokens,
    quick_settings,
    with_method,
)


def _duration(text: str, label: str) -> float:
    from sagemeter.calibrate.timing import parse_duration

    return parse_duration(text, label)


def _ray_address(text: str, label: str) -> str:
    from sagemeter.transport.ray_pool import check_address

    try:
        return check_address(text)
    except UserError as exc:
        raise UserError(str(exc).replace("--ray ", f"{label} ", 1)) from None


# Seconds, which the command line and plans may write as a duration: 120s, 500ms, 3m, 1h.
SECONDS = Text(_duration, unit="s")
NOT_A_SETTING = "not a setting of the result: an MCP server joins no cluster an assistant names"


class MeasureOptions(OptionsModel):
    """`[measure]`: `sagemeter measure`'s options by their long names; unset ones keep the
    article's values (or, with `quick = true`, the quick ones)."""

    TABLE: ClassVar[str] = "measure"

    quick: Annotated[
        bool, Field(description="shrink everything: seconds, for smoke tests"), Opt("quick")
    ] = False
    method: Annotated[
        Method | None,
        Field(
            description="sagemeter (ours) or article: the source article's exact method (one "
            "prompt, 64-token answers, no seed, median of batch rates, 12 s pauses, its scoring "
            "rule)"
        ),
        Opt("method"),
    ] = None
    short_tokens: Annotated[
        int | None,
        Field(gt=0, le=MAX_TOKENS, description="decode: short reply length"),
        Opt("short_tokens"),
    ] = None
    long_tokens: Annotated[
        int | None,
        Field(gt=1, le=MAX_TOKENS, description="decode: long reply length"),
        Opt("long_tokens"),
    ] = None
    repeats: Annotated[
        int | None,
        Field(gt=0, le=MAX_REPEATS, description="decode and prefill: replies of each length"),
        Opt("decode_repeats", mcp="decode_repeats"),
    ] = None
    prefill_tokens: Annotated[
        list[int] | None,
        Field(
            max_length=2,
            description="prefill: the short and the long prompt's length in the server's "
            "tokens, e.g. 256,4096; none leaves the phase out",
        ),
        Text(parse_prefill_tokens, check=check_prefill_tokens),
        Opt("prefill_tokens"),
    ] = None
    long_prompt_levels: Annotated[
        list[int] | None,
        Field(
            max_length=MAX_LEVELS,
            description="long prompts under load: requests at once, each its own prompt of the "
            "prefill phase's long length, e.g. 1,4,16; none: not run (needs the prefill phase)",
        ),
        Text(parse_levels_or_none, check=check_levels),
        Opt("long_prompt_levels"),
    ] = None
    levels: Annotated[
        list[int] | None,
        Field(
            min_length=1,
            max_length=MAX_LEVELS,
            description="parallel: requests at once, e.g. 1,4,16",
        ),
        Text(parse_levels, check=check_levels),
        Opt("load_levels", mcp="load_levels"),
    ] = None
    load_tokens: Annotated[
        int | None,
        Field(gt=0, le=MAX_TOKENS, description="parallel: tokens per reply"),
        Opt("load_max_tokens", mcp="load_max_tokens"),
    ] = None
    batches: Annotated[
        int | None,
        Field(gt=0, le=MAX_BATCHES, description="parallel: batches per level"),
        Opt("load_batches", mcp="load_batches"),
    ] = None
    questions: Annotated[
        str | None,
        Field(description="quality: a built-in question set's name or a JSONL file"),
        Opt("questions"),
    ] = None
    quality_max_tokens: Annotated[
        int | None,
        Field(gt=0, le=MAX_TOKENS, description="quality: reply cap"),
        Opt("quality_max_tokens"),
    ] = None
    questions_per_family: Annotated[
        int | None,
        Field(gt=0, le=MAX_QUESTIONS, description="quality: only the first N of each family"),
        Opt("questions_per_family", unset="all"),
    ] = None
    margin: Annotated[
        float | None,
        Field(gt=0, le=100, description="quality: the drop in points that still passes"),
        Opt("margin_points", mcp="margin_points"),
    ] = None
    fidelity: Annotated[
        int | None,
        Field(
            ge=0,
            le=MAX_QUESTIONS,
            description="token-level fidelity on the first N questions (their logprobs; 0: off)",
        ),
        Opt("fidelity_prompts", mcp="fidelity_prompts"),
    ] = None
    timeout: Annotated[
        float | None,
        Field(
            gt=0,
            le=MAX_WAIT_S,
            description="the longest one request may take, in seconds",
        ),
        SECONDS,
        Opt("timeout_s", mcp="timeout_s"),
    ] = None
    stall: Annotated[
        float | None,
        Field(
            gt=0,
            le=MAX_WAIT_S,
            description="once tokens flow, the longest silence before the reply counts as "
            "stalled and is asked again, in seconds",
        ),
        SECONDS,
        Opt("stall_s", mcp="stall_s"),
    ] = None
    startup_timeout: Annotated[
        float | None,
        Field(
            gt=0,
            le=MAX_WAIT_S,
            description="local:, vllm:, cmd: targets: the longest wait for the server sagemeter "
            "starts to answer, in seconds",
        ),
        SECONDS,
        Opt("startup_timeout_s", mcp="startup_timeout_s", unset="the engine's own, cmd: 600s"),
    ] = None
    retries: Annotated[
        int | None,
        Field(ge=0, le=20, description="tries sent again after a 429, 5xx or a reset"),
        Opt("retries"),
    ] = None
    reruns: Annotated[
        int | None,
        Field(
            ge=0,
            le=20,
            description="parallel: extra batches per level to replace ones that do not count",
        ),
        Opt("batch_reruns", mcp="batch_reruns"),
    ] = None
    metrics_wait: Annotated[
        float | None,
        Field(
            ge=0,
            le=3600,
            description="SageMaker targets: the longest wait, once measured, for the endpoint's "
            "CloudWatch metrics of each phase, in seconds; 0 reads what is there",
        ),
        SECONDS,
        Opt("metrics_wait_s", mcp="metrics_wait_s"),
    ] = None
    ray: Annotated[
        str | None,
        Field(
            description="parallel: send the batches from a Ray cluster's nodes: auto, local, "
            "ray://HOST:PORT or HOST:PORT"
        ),
        Text(_ray_address),
        Opt(None, not_on=(("mcp", NOT_A_SETTING),), envvar="SAGEMETER_RAY", unset="off"),
    ] = None

    def settings(self, stop: SpeedStop | None = None, face: Face = "plan") -> MeasureSettings:
        """The MeasureSettings these options make (with `stop`'s speed target); a bad value is
        one line naming its option as `face` spells it."""
        given = (self, stop if stop is not None else SpeedStop())
        settings: MeasureSettings = MEASURE.settings(
            given, face, quick=self.quick, method=self.method
        )
        return settings


class SpeedStop(OptionsModel):
    """When a speed phase may stop before, or run past, its fixed counts (a plan's `[stop]`)."""

    TABLE: ClassVar[str] = "stop"

    speed: Annotated[
        float | None,
        Field(
            gt=0,
            lt=1,
            description="repeat decode pairs past {repeats}, and each level's batches past "
            "{batches}, until the figure's 95% interval's half-width is within this share of it, "
            "e.g. 0.03",
        ),
        Opt("speed_precision", mcp="speed_precision", cli="--speed-precision", unset="off"),
    ] = None
    max_repeats: Annotated[
        int | None,
        Field(gt=0, le=MAX_REPEATS, description="decode: the most pairs {speed} may ask"),
        Opt("speed_max_repeats"),
    ] = None
    max_batches: Annotated[
        int | None,
        Field(
            gt=0, le=MAX_BATCHES, description="parallel: the most batches per level {speed} may ask"
        ),
        Opt("speed_max_batches"),
    ] = None
    max_minutes: Annotated[
        float | None,
        Field(
            gt=0,
            le=MAX_MINUTES,
            description="the longest the measurement may take, in minutes: the phase in progress "
            "is cut there and the rest not run, each named in the result",
        ),
        Opt("max_minutes", unset="no limit"),
    ] = None


def _article() -> MeasureSettings:
    return with_method(MeasureSettings(), "article")


def _build(quick: bool, overrides: dict[str, Any], **kwargs: Any) -> MeasureSettings:
    return measure_settings(quick, overrides, **kwargs)


MEASURE = Command(
    "measure",
    models=(MeasureOptions, SpeedStop),
    defaults=MeasureSettings,
    build=_build,
    variants=(Variant("quick", True, quick_settings), Variant("method", "article", _article)),
)
