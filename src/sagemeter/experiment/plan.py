"""The plan file: what an experiment compares, in which order, with which settings and limits.

A plan is TOML (`sagemeter run PLAN.toml`), or built in code (`demo`). It is checked whole before
anything starts, and every problem is reported at once, one line each naming its key (`arm
"qat".sagemaker.modle: unknown key`). Keys may be written with `_` or `-` (`long_tokens` or
`long-tokens`), except in `env`, whose keys are the container's variable names.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sagemeter import sagemaker as sm
from sagemeter.calibrate.timing import duration_field
from sagemeter.engines.endpoints import check_target
from sagemeter.errors import ManyProblems, UserError
from sagemeter.evidence.sequential import DEFAULT_BLOCK, planned_looks
from sagemeter.experiment.cloud import deploy_spec
from sagemeter.experiment.steps import visits
from sagemeter.limits import (
    MAX_CONTEXT_TOKENS,
    MAX_DEADLINE_MINUTES,
    MAX_MINUTES,
    MAX_QUESTIONS,
    CostUsd,
    DeadlineMinutes,
    PricePerHour,
    parse_levels,
)
from sagemeter.measure.slo import SloOptions
from sagemeter.questions import builtin_sets, load_question_set
from sagemeter.results.predicted_decode import PredictedDecode
from sagemeter.sagemaker.spec import (
    DEFAULT_DOWNLOAD_TIMEOUT_S,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_INSTANCE_TYPE,
    DEFAULT_MAX_MODEL_LEN,
    DEFAULT_STARTUP_TIMEOUT_S,
)
from sagemeter.settings import (
    MeasureSettings,
    Method,
    measure_settings,
    parse_levels_or_none,
    parse_prefill_tokens,
    settings_with,
)
from sagemeter.targets import (
    SAGEMAKER_ENDPOINT_NAME,
    CommandTarget,
    SageMakerTarget,
    Target,
    parse_target,
)
from sagemeter.textfiles import PLAN_CAP, decode_utf8, read_capped
from sagemeter.transport.ray_pool import check_address

INTERLEAVED = "interleaved"
MAX_ARMS = 26  # one letter each in `order`
MAX_VISITS = 200  # letters in `order`: each a deploy (or start) and a measurement
PLAN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
ARM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_ORDER = re.compile(r"^[A-Z]+$")
# `env` holds container variable names: its keys are taken as written.
_VERBATIM_KEYS = frozenset({"env"})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _as_command_line_reads(value: Any, parse: Callable[[str, str], Any]) -> Any:
    """A plan value written as the command line writes it (`"1,4,16"`, `"none"`) read by the
    command line's own parser; a bad one is a ValueError naming only the problem (pydantic puts
    it after the key). Anything but a string passes through."""
    if not isinstance(value, str):
        return value
    try:
        return parse(value, repr(value))
    except UserError as exc:
        text = str(exc)
        for prefix in (f"{value!r}: ", f"{value!r} "):
            text = text.removeprefix(prefix)
        raise ValueError(text) from None


class MeasureOptions(_Strict):
    """`[measure]`: `sagemeter measure`'s options by their long names; unset ones keep the
    article's values (or, with `quick = true`, the quick ones)."""

    quick: bool = False
    method: Method | None = None
    short_tokens: int | None = None
    long_tokens: int | None = None
    repeats: int | None = None
    prefill_tokens: list[int] | None = Field(
        None, description='[256, 4096], "256,4096", or "none" / [] (the phase is not run)'
    )
    long_prompt_levels: list[int] | None = Field(
        None, description='[1, 4, 16], "1,4,16", or "none" / [] (not run; needs prefill_tokens)'
    )
    levels: list[int] | None = None
    load_tokens: int | None = None
    batches: int | None = None
    questions: str | None = None
    quality_max_tokens: int | None = None
    questions_per_family: int | None = None
    margin: float | None = None
    fidelity: int | None = None
    timeout: float | None = Field(None, description='seconds, or a duration such as "120s"')
    stall: float | None = Field(None, description='seconds, or a duration such as "30s"')
    startup_timeout: float | None = Field(
        None, description='local:, vllm:, cmd: arms: seconds, or a duration such as "10m"'
    )
    retries: int | None = None
    reruns: int | None = None
    metrics_wait: float | None = Field(
        None,
        description="SageMaker arms: the longest wait for the endpoint's CloudWatch metrics, "
        'seconds or a duration such as "3m"; 0 reads what is there',
    )
    ray: str | None = Field(
        None,
        description="parallel: send the batches from a Ray cluster's nodes, as `measure --ray` "
        "(auto, local, ray://HOST:PORT or HOST:PORT); not a setting of the result",
    )

    @field_validator("ray")
    @classmethod
    def _ray(cls, value: str | None) -> str | None:
        """The address as `measure --ray` takes it; the cluster is joined by the measure step."""
        if value is None:
            return None

        try:
            return check_address(value)
        except UserError as exc:
            raise ValueError(str(exc).removeprefix("--ray ")) from None

    @field_validator("levels", mode="before")
    @classmethod
    def _levels(cls, value: Any) -> Any:
        """`[1, 4, 16]`, or `"1,4,16"` as the command line writes it."""
        return _as_command_line_reads(value, parse_levels)

    @field_validator("long_prompt_levels", mode="before")
    @classmethod
    def _long_prompt_levels(cls, value: Any) -> Any:
        """`[1, 4, 16]`, or `"1,4,16"` / `"none"` as the command line writes it."""
        return _as_command_line_reads(value, parse_levels_or_none)

    @field_validator("prefill_tokens", mode="before")
    @classmethod
    def _prefill_tokens(cls, value: Any) -> Any:
        """`[256, 4096]`, or `"256,4096"` / `"none"` as the command line writes it."""
        return _as_command_line_reads(value, parse_prefill_tokens)

    @field_validator("timeout", "stall", "startup_timeout", "metrics_wait", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        """A number of seconds, or a duration such as "120s" or "500ms"."""
        return duration_field(value)

    def settings(self) -> MeasureSettings:
        """The MeasureSettings these options make; a bad value is one line naming its key."""
        overrides = {
            "short_tokens": self.short_tokens,
            "long_tokens": self.long_tokens,
            "decode_repeats": self.repeats,
            "prefill_tokens": self.prefill_tokens,
            "long_prompt_levels": self.long_prompt_levels,
            "load_levels": self.levels,
            "load_max_tokens": self.load_tokens,
            "load_batches": self.batches,
            "questions": self.questions,
            "quality_max_tokens": self.quality_max_tokens,
            "questions_per_family": self.questions_per_family,
            "margin_points": self.margin,
            "fidelity_prompts": self.fidelity,
            "timeout_s": self.timeout,
            "stall_s": self.stall,
            "retries": self.retries,
            "batch_reruns": self.reruns,
            "startup_timeout_s": self.startup_timeout,
            "metrics_wait_s": self.metrics_wait,
        }
        return measure_settings(self.quick, overrides, method=self.method, label=_measure_key)


_MEASURE_KEYS = {
    "decode_repeats": "repeats",
    "load_levels": "levels",
    "load_max_tokens": "load_tokens",
    "load_batches": "batches",
    "margin_points": "margin",
    "fidelity_prompts": "fidelity",
    "timeout_s": "timeout",
    "stall_s": "stall",
    "batch_reruns": "reruns",
    "startup_timeout_s": "startup_timeout",
    "metrics_wait_s": "metrics_wait",
}


def _stop_key(field: str) -> str:
    """A [stop] setting as the plan spells it (others as `_measure_key` does)."""
    named = {
        "speed_precision": "stop.speed",
        "speed_max_repeats": "stop.max_repeats",
        "speed_max_batches": "stop.max_batches",
        "max_minutes": "stop.max_minutes",
    }
    return named.get(field) or _measure_key(field)


def _measure_key(field: str) -> str:
    """A MeasureSettings field as the plan spells it: `load_max_tokens` → `measure.load_tokens`."""
    return f"measure.{_MEASURE_KEYS.get(field, field)}"


class EstimateOptions(_Strict):
    """`[estimate]`: the assumptions behind `--dry-run`'s time and cost, and the spend cap check."""

    tokens_per_second: float = Field(
        50.0,
        gt=0,
        le=1_000_000,
        description="per stream (the article's bf16 Gemma 4 E2B on one L4: 51)",
    )
    deploy_minutes: float = Field(
        10.0,
        ge=0,
        le=MAX_DEADLINE_MINUTES,
        description="create to InService (the article: about ten minutes)",
    )
    delete_minutes: float = Field(
        2.0, ge=0, le=MAX_DEADLINE_MINUTES, description="delete request to gone"
    )


class StopOptions(_Strict):
    """`[stop]`: when a phase may end before its fixed count (off unless set)."""

    quality: Literal["decided"] | None = Field(
        None,
        description='"decided": with order = "interleaved", ask both arms the questions in '
        "blocks and stop at the first PASS or FAIL of a sequential test at the margin",
    )
    block: int = Field(
        DEFAULT_BLOCK,
        ge=1,
        le=MAX_QUESTIONS,
        description="questions asked to both arms between two looks",
    )
    speed: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="decode pairs repeat past measure.repeats, and each level's batches past "
        "measure.batches, until the figure's 95% interval's half-width is within this share of "
        "it (0.03: 3%), up to max_repeats and max_batches",
    )
    max_repeats: int | None = Field(
        None, ge=1, le=1000, description="the most decode pairs `speed` may ask (default 20)"
    )
    max_batches: int | None = Field(
        None, ge=1, le=100, description="the most batches per level `speed` may ask (default 6)"
    )
    max_minutes: float | None = Field(
        None,
        gt=0,
        le=MAX_MINUTES,
        description="the longest one arm's measurement may take: the phase in progress is cut "
        "there, the rest not run, each named in its result (beside the run's max_cost_usd)",
    )


class SageMakerArm(_Strict):
    """`[arm.sagemaker]`: an endpoint the run deploys, measures and deletes (`deploy`'s options)."""

    model: str = Field(min_length=1, description="Hugging Face model id")
    instance_type: str = DEFAULT_INSTANCE_TYPE
    region: str | None = Field(None, description="default: AWS_REGION, AWS_DEFAULT_REGION, profile")
    fallback_regions: list[str] = Field(default_factory=list)
    fallback_instance_types: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    endpoint: str | None = Field(None, description="endpoint name; default PLAN-ARM")
    role: str | None = Field(None, description="execution role ARN; default $SAGEMETER_ROLE_ARN")
    image: str | None = None
    image_tag: str | None = None
    max_model_len: int = Field(
        DEFAULT_MAX_MODEL_LEN, ge=0, le=MAX_CONTEXT_TOKENS, description="0 leaves it to vLLM"
    )
    gpu_memory_utilization: float = Field(DEFAULT_GPU_MEMORY_UTILIZATION, ge=0, le=1)
    count: int = Field(1, ge=1, le=100)
    inference_ami: str | None = None
    startup_timeout: int = DEFAULT_STARTUP_TIMEOUT_S
    download_timeout: int = DEFAULT_DOWNLOAD_TIMEOUT_S
    provision_timeout: int | None = None
    deadline_minutes: DeadlineMinutes = Field(60.0, description="stop waiting for InService after")
    predicted_decode: PredictedDecode | None = Field(
        None,
        description="what `sagemaker recommend --plan` predicted for instance_type; the run "
        "copies it into the arm's result, and the report puts it beside the measured decode",
    )

    @field_validator("env", mode="before")
    @classmethod
    def _env_strings(cls, value: Any) -> Any:
        """TOML writes 8192 as a number; the container environment holds strings."""
        if isinstance(value, Mapping):
            return {
                key: str(item).lower() if isinstance(item, bool) else str(item)
                for key, item in value.items()
            }
        return value

    @property
    def instance_types(self) -> list[str]:
        return [self.instance_type, *self.fallback_instance_types]


class Arm(_Strict):
    """One checkpoint compared: a target that already runs, or a platform table the run owns."""

    name: str
    target: str | None = Field(
        None,
        description="http://HOST:PORT, NAME@REGION: used, never deleted; local:CHECKPOINT, "
        "vllm:CHECKPOINT: started for each visit and stopped after it",
    )
    sagemaker: SageMakerArm | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not ARM_NAME.match(value):
            raise ValueError(
                f"{value!r}: use letters, digits, dots, dashes or underscores (at most 63)"
            )
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> Arm:
        if self.target is None and self.sagemaker is None:
            raise ValueError(
                'give target = "…" (an endpoint that runs already) or an [arm.sagemaker] table'
            )
        if self.target is not None and self.sagemaker is not None:
            raise ValueError("give target or an [arm.sagemaker] table, not both")
        return self

    @property
    def deployed(self) -> bool:
        """Whether the run creates (and deletes) this arm's endpoint."""
        return self.sagemaker is not None

    def parsed_target(self) -> Target:
        assert self.target is not None
        return parse_target(self.target)


class Plan(_Strict):
    name: str
    order: str | None = Field(
        None,
        max_length=MAX_VISITS,
        description="ABA (the default for two arms), any string of arm letters starting with A, "
        "or interleaved",
    )
    price_per_hour: PricePerHour | None = None
    max_cost_usd: CostUsd | None = None
    measure: MeasureOptions = Field(default_factory=MeasureOptions)
    slo: SloOptions | None = Field(
        None,
        description="the latency target each arm's operating point is searched against "
        "(its concurrency or rate, tokens/s and $/M tokens there: measure/slo.py)",
    )
    estimate: EstimateOptions = Field(default_factory=EstimateOptions)
    stop: StopOptions = Field(default_factory=StopOptions)
    arms: list[Arm] = Field(alias="arm", min_length=2, max_length=MAX_ARMS)

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not PLAN_NAME.match(value):
            raise ValueError(
                f"{value!r}: use letters, digits, dots, dashes or underscores (at most 64)"
            )
        return value

    @property
    def order_text(self) -> str:
        """The order as written, or the default: every arm in plan order, then the first again."""
        if self.order is not None:
            return self.order
        return "".join(chr(ord("A") + i) for i in range(len(self.arms))) + "A"

    @property
    def interleaved(self) -> bool:
        return self.order_text == INTERLEAVED

    def arm_named(self, name: str) -> Arm:
        return next(arm for arm in self.arms if arm.name == name)

    def endpoint_name(self, arm: Arm) -> str:
        """The SageMaker endpoint an arm deploys: its own `endpoint`, else PLAN-ARM made valid."""
        assert arm.sagemaker is not None
        if arm.sagemaker.endpoint:
            return arm.sagemaker.endpoint
        raw = re.sub(r"[^A-Za-z0-9]+", "-", f"{self.name}-{arm.name}")
        return raw.strip("-")[:63].rstrip("-")

    def settings(self) -> MeasureSettings:
        """`[measure]`'s settings with `[stop]`'s speed target."""
        settings = self.measure.settings()
        stop = self.stop
        if all(
            value is None
            for value in (stop.speed, stop.max_repeats, stop.max_batches, stop.max_minutes)
        ):
            return settings

        overrides = {
            "speed_precision": self.stop.speed,
            "speed_max_repeats": self.stop.max_repeats,
            "speed_max_batches": self.stop.max_batches,
            "max_minutes": self.stop.max_minutes,
        }
        return settings_with(settings, overrides, label=_stop_key)

    def to_data(self) -> dict[str, Any]:
        """The plan as JSON data that `plan_from_data` reads back (kept in the journal)."""
        return self.model_dump(mode="json", by_alias=True, exclude_defaults=True)


def _normalised(value: Any, verbatim: bool = False) -> Any:
    """Keys with `-` become `_` (TOML allows both spellings), except inside `env`."""
    if isinstance(value, dict):
        return {
            (key if verbatim else str(key).replace("-", "_")): _normalised(
                item, verbatim=str(key) in _VERBATIM_KEYS
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_normalised(item) for item in value]
    return value


def _where(data: Mapping[str, Any], loc: tuple[int | str, ...]) -> str:
    """A pydantic location as the plan's key path: `arm "qat".sagemaker.model`.

    The location is walked through the data itself, so the names pydantic adds for the members
    of a union (`str`, `list[int]`) are left out.
    """
    parts: list[str] = []
    node: Any = data
    for part in loc:
        if isinstance(node, dict) and part in node:
            node = node[part]
            if part != "arm":
                parts.append(str(part))
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
            name = node.get("name") if isinstance(node, dict) and parts == [] else None
            if isinstance(name, str) and name:
                parts.append(f'arm "{name}"')
            elif parts:
                parts[-1] += f"[{part + 1}]"
            else:
                parts.append(f"arm[{part + 1}]")
        elif isinstance(part, str) and isinstance(node, dict):
            parts.append(part)  # a key that is missing or not allowed
            node = None
    return ".".join(parts)


def _message(error: Mapping[str, Any]) -> str:
    kind = error.get("type")
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "missing (required)"
    if kind == "too_short" and tuple(error.get("loc", ())) == ("arm",):
        return "a plan compares at least two arms: give two or more [[arm]] tables"
    return str(error.get("msg", "invalid")).removeprefix("Value error, ")


class PlanProblems(ManyProblems):
    """Every problem of a plan at once, one line each (a single problem stays one line)."""


NAMED_CHECKPOINTS = frozenset({"smollm2-q4_1", "smollm2-f32"})  # engines.checkpoints' names


def anchored(value: str, base: Path) -> str:
    """A path as the plan means it: a relative one is in the plan file's folder `base`."""
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else (base / path).resolve())


def _is_path(checkpoint: str) -> bool:
    """A checkpoint given as a path (`models/b.gguf`, `b.gguf`, `./hf/c`, `~/m`), not a name."""
    return "/" in checkpoint or checkpoint.endswith(".gguf") or checkpoint.startswith(("~", "."))


def anchored_target(target: str, base: Path) -> str:
    """A `local:` or `vllm:` target's checkpoint path anchored at `base` (a name stays a name,
    so an unknown one is still called an unknown checkpoint)."""
    text = target.strip()
    for prefix in ("local:", "vllm:"):
        checkpoint = text.removeprefix(prefix).strip()
        if text.startswith(prefix) and checkpoint not in NAMED_CHECKPOINTS and _is_path(checkpoint):
            return prefix + anchored(checkpoint, base)
    return target


def anchored_questions(questions: str | None, base: Path) -> str | None:
    """The questions file anchored at `base` (a built-in set's name stays a name)."""
    if questions is None or questions in builtin_sets():
        return questions
    return anchored(questions, base)


def plan_from_data(
    data: Mapping[str, Any], source: str, *, ready: bool = False, base: Path | None = None
) -> Plan:
    """A Plan from TOML (or JSON) data; its problems, all of them, are one PlanProblems.

    With `ready`, what running the plan needs is checked too (each arm's target: a checkpoint
    that exists, a vLLM that can run it; the question set's file), so that a plan's every
    problem shows in one run rather than one per run; its relative paths are looked for in
    `base`, the plan file's folder, as the run will read them.
    """
    normalised = _normalised(dict(data))
    problems: list[str] = []
    plan: Plan | None = None
    arms: list[Arm]
    measure: MeasureOptions | None
    try:
        plan = Plan.model_validate(normalised)
    except ValidationError as exc:
        problems += _validation_problems(normalised, exc)
    if plan is not None:
        problems += plan_problems(plan)
        arms, measure = list(plan.arms), plan.measure
    else:
        arms, measure = _valid_parts(normalised)
        problems += _name_problems(arms)
        order, raw_arms = normalised.get("order"), normalised.get("arm")
        if isinstance(order, str) and order != INTERLEAVED and isinstance(raw_arms, list):
            problems += filter(None, [_order_problem(order, len(raw_arms))])
        if measure is not None:
            problems += _settings_problems(measure)
    if ready:
        problems += _ready_problems(arms, measure, base)
        if plan is not None:
            problems += _deploy_problems(plan)
    if problems:
        raise PlanProblems(source, list(dict.fromkeys(problems)))
    assert plan is not None
    return plan


def _validation_problems(data: Mapping[str, Any], exc: ValidationError) -> list[str]:
    """Pydantic's errors as lines naming their keys: one per key (an unknown or missing key
    before a wrong value), in the plan's order."""
    rank = {"extra_forbidden": 0, "missing": 1}
    best: dict[str, Any] = {}
    errors, meant = _misspelt(exc.errors())
    for error in errors:
        loc = tuple(error["loc"])
        where = _where(data, loc) or str(loc[0] if loc else "")
        kept = best.get(where)
        if kept is None or rank.get(error["type"], 2) < rank.get(kept["type"], 2):
            best[where] = error
    ordered = sorted(best.items(), key=lambda item: _position(data, tuple(item[1]["loc"])))
    return [
        (f"{where}: " if where else "")
        + _message(error)
        + (f" (did you mean {meant[tuple(error['loc'])]}?)" if tuple(error["loc"]) in meant else "")
        for where, error in ordered
    ]


def _misspelt(errors: list[Any]) -> tuple[list[Any], dict[tuple[Any, ...], str]]:
    """An unknown key beside a missing one it resembles (`modle`, `model`) is one problem, a
    misspelling: the missing key's error goes, the unknown one says which key was meant."""
    import difflib

    missing = {tuple(e["loc"]): e for e in errors if e["type"] == "missing"}
    meant: dict[tuple[Any, ...], str] = {}
    dropped: set[tuple[Any, ...]] = set()
    for error in errors:
        loc = tuple(error["loc"])
        if error["type"] != "extra_forbidden" or not loc or not isinstance(loc[-1], str):
            continue
        siblings = [m[-1] for m in missing if m[:-1] == loc[:-1] and m not in dropped]
        close = difflib.get_close_matches(loc[-1], [str(k) for k in siblings], n=1)
        if close:
            meant[loc] = close[0]
            dropped.add((*loc[:-1], close[0]))
    return [e for e in errors if tuple(e["loc"]) not in dropped], meant


def _position(data: Mapping[str, Any], loc: tuple[int | str, ...]) -> tuple[int, ...]:
    """Where a location is in the plan as written, so problems are listed top to bottom."""
    place: list[int] = []
    node: Any = data
    for part in loc:
        if isinstance(node, dict) and part in node:
            place.append(list(node).index(part))
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            place.append(part)
            node = node[part]
        else:
            place.append(len(node) if isinstance(node, dict | list) else 0)
            break
    return tuple(place)


def _valid_parts(data: Mapping[str, Any]) -> tuple[list[Arm], MeasureOptions | None]:
    """When the whole plan is not valid: the arms and the [measure] table that are, alone, so
    their own problems are found in the same run."""
    arms = []
    raw_arms = data.get("arm")
    for raw in raw_arms if isinstance(raw_arms, list) else []:
        try:
            arms.append(Arm.model_validate(raw))
        except ValidationError:
            continue  # its problems are among pydantic's
    try:
        measure = MeasureOptions.model_validate(data.get("measure", {}))
    except ValidationError:
        measure = None
    return arms, measure


def _name_problems(arms: list[Arm]) -> list[str]:
    problems = []
    seen: dict[str, int] = {}
    for position, arm in enumerate(arms, start=1):
        if arm.name in seen:
            problems.append(
                f'arm[{position}].name: "{arm.name}" is already the name of '
                f"arm[{seen[arm.name]}]; every arm needs its own name"
            )
        else:
            seen[arm.name] = position
    return problems


def _settings_problems(measure: MeasureOptions, plan: Plan | None = None) -> list[str]:
    try:
        measure.settings() if plan is None else plan.settings()
    except UserError as exc:
        return [str(exc)]
    return []


def _ready_problems(
    arms: list[Arm], measure: MeasureOptions | None, base: Path | None
) -> list[str]:
    """What a run would stop on at its start: each target, the question set (relative paths in
    `base`, when given)."""
    problems = []
    for arm in arms:
        if arm.target is None:
            continue
        try:
            target = arm.target if base is None else anchored_target(arm.target, base)
            parsed = parse_target(target)
            if isinstance(parsed, CommandTarget) and base is not None:
                parsed = replace(parsed, cwd=str(base))  # where the run starts it
            check_target(parsed)
        except UserError as exc:
            problems.append(f'arm "{arm.name}".target: {exc}')
    if measure is not None and measure.questions is not None:
        questions = (
            measure.questions if base is None else anchored_questions(measure.questions, base)
        )
        assert questions is not None
        try:
            # a built-in set's name, or a file
            load_question_set(questions)
        except UserError as exc:
            problems.append(f"measure.questions: {exc}")
    return problems


def _deploy_problems(plan: Plan) -> list[str]:
    """Each deployed arm's region, role and container spec, as `sagemaker deploy` would build
    them (no AWS call: what the account holds is checked when the run starts)."""
    deployed = [arm for arm in plan.arms if arm.sagemaker is not None]
    if not deployed:
        return []

    aws = sm.Aws()
    problems = []
    for arm in deployed:
        try:
            deploy_spec(plan, arm, aws)
        except UserError as exc:
            problems.append(str(exc))
    return problems


def stop_problems(plan: Plan, question_count: int) -> list[str]:
    """The sequential stop's looks for a set of `question_count` questions: at most
    `MAX_LOOKS` (the boundaries are computed for every planned look)."""
    if plan.stop.quality != "decided":
        return []
    try:
        planned_looks(question_count, plan.stop.block)
    except ValueError as exc:
        return [f"stop.block: {exc}"]
    return []


def parse_plan(
    text: str, source: str = "plan", *, ready: bool = False, base: Path | None = None
) -> Plan:
    """A Plan from TOML text (`ready`, `base`: with what running it needs, see
    `plan_from_data`)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{source}: not valid TOML: {exc}") from None
    return plan_from_data(data, source, ready=ready, base=base)


def load_plan(path: Path, *, ready: bool = True) -> tuple[Plan, str]:
    """The plan in `path`, checked whole (with what running it needs unless `ready` is False:
    the MCP face vets the names a plan gives before any of them is read), and its text (copied
    into the run folder)."""
    try:
        raw = read_capped(path, PLAN_CAP)
    except UserError as exc:
        if path.is_dir():
            raise UserError(f"{path}: is a folder; give the plan's .toml file") from None
        if not path.exists() and not path.is_symlink():
            raise UserError(f"{path}: no such plan file") from None
        raise exc from None
    text = decode_utf8(path, raw)
    if not text.strip():
        raise UserError(f"{path}: is empty; a plan names its arms (see `sagemeter run --help`)")
    base = path.expanduser().resolve().parent
    return parse_plan(text, str(path), ready=ready, base=base), text


def check_plan(plan: Plan, source: str) -> None:
    """What pydantic cannot see alone, as one PlanProblems (see `plan_problems`)."""
    problems = plan_problems(plan)
    if problems:
        raise PlanProblems(source, problems)


def plan_problems(plan: Plan) -> list[str]:
    """What pydantic cannot see alone: names that collide, the order, measure settings."""
    problems = _name_problems(list(plan.arms))
    endpoints: dict[str, str] = {}
    for arm in plan.arms:
        if arm.sagemaker is None:
            continue
        endpoint = plan.endpoint_name(arm)
        key = f'arm "{arm.name}".sagemaker.endpoint'
        if not SAGEMAKER_ENDPOINT_NAME.match(endpoint):
            problems.append(
                f"{key}: {endpoint!r} is not a valid endpoint name (1-63 letters, digits, hyphens)"
            )
        elif endpoint in endpoints:
            problems.append(
                f'{key}: {endpoint!r} is also arm "{endpoints[endpoint]}"\'s endpoint; '
                "set `endpoint` to tell them apart"
            )
        endpoints[endpoint] = arm.name
    if plan.measure.ray is not None:
        for arm in plan.arms:
            if arm.deployed or is_sagemaker_arm(arm):
                problems.append(
                    f'measure.ray: arm "{arm.name}" is a SageMaker endpoint, whose '
                    "batches go through boto3 on this machine; leave out ray"
                )
    if plan.slo is not None:
        for arm in plan.arms:
            if arm.deployed or is_sagemaker_arm(arm):
                problems.append(
                    f'slo: arm "{arm.name}" is a SageMaker endpoint, which answers through the '
                    "runtime API the load generator does not speak; leave out [slo] or the arm"
                )
    order = plan.order_text
    order_problem = None if order == INTERLEAVED else _order_problem(order, len(plan.arms))
    if order_problem:
        problems.append(order_problem)
    settings_problems = _settings_problems(plan.measure, plan)
    problems += settings_problems
    if settings_problems:
        return problems
    settings = plan.settings()
    if plan.stop.quality == "decided" and not (plan.interleaved and len(plan.arms) == 2):
        problems.append(
            'stop.quality: "decided" needs order = "interleaved" and exactly two arms (both '
            "live, asked the same questions in turn)"
        )
    if plan.interleaved and (settings.fidelity_prompts or 0) > 0:
        problems.append(
            'measure.fidelity: not with order = "interleaved" (B is forced along '
            "A's answers, which exist only once A is measured); use an A-B-A order"
        )
    if order_problem or problems:
        return problems

    names: dict[str, str] = {}
    for visit in visits(plan):
        if visit.result_name in names and names[visit.result_name] != visit.arm.name:
            problems.append(
                f'arm "{visit.arm.name}": its repeat would be called '
                f'{visit.result_name!r}, which is arm "{names[visit.result_name]}"\'s name'
            )
        names[visit.result_name] = visit.arm.name
    return problems


def is_sagemaker_arm(arm: Arm) -> bool:
    """An arm whose target is a SageMaker endpoint (a target that does not parse is said
    elsewhere)."""
    try:
        return isinstance(arm.parsed_target(), SageMakerTarget)
    except UserError:
        return False


def _order_problem(order: str, arms: int) -> str | None:
    letters = [chr(ord("A") + i) for i in range(arms)]
    if not _ORDER.match(order):
        return (
            f"order: {order!r}: write the arms' letters in run order (e.g. ABA, ABAB) "
            f'or "{INTERLEAVED}"'
        )
    unknown = sorted(set(order) - set(letters))
    if unknown:
        return (
            f"order: {order!r} names arm {', '.join(unknown)}, but the plan has "
            f"{arms} arms ({', '.join(letters)})"
        )
    if order[0] != "A":
        return f"order: {order!r} must start with A (the baseline, arm 1)"
    missing = [letter for letter in letters if letter not in order]
    if missing:
        return f"order: {order!r} never measures arm {', '.join(missing)}"
    return None


def arm_kind(arm: Arm) -> Literal["sagemaker", "target"]:
    return "sagemaker" if arm.sagemaker is not None else "target"
