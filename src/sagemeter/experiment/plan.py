"""The plan file: what an experiment compares, in which order, with which settings and limits.

A plan is TOML (`sagemeter run PLAN.toml`), or built in code (`demo`). It is checked whole before
anything starts: every problem is one line that names the key (`arm "qat".sagemaker.modle:
unknown key`). Keys may be written with `_` or `-` (`long_tokens` or `long-tokens`), except in
`env`, whose keys are the container's variable names.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sagemeter.errors import UserError
from sagemeter.sagemaker.spec import (
    DEFAULT_DOWNLOAD_TIMEOUT_S,
    DEFAULT_GPU_MEMORY_UTILIZATION,
    DEFAULT_INSTANCE_TYPE,
    DEFAULT_MAX_MODEL_LEN,
    DEFAULT_STARTUP_TIMEOUT_S,
)
from sagemeter.settings import MeasureSettings, Method, measure_settings
from sagemeter.targets import SAGEMAKER_ENDPOINT_NAME, SageMakerTarget, Target, parse_target

INTERLEAVED = "interleaved"
PLAN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
ARM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_ORDER = re.compile(r"^[A-Z]+$")
# `env` holds container variable names: its keys are taken as written.
_VERBATIM_KEYS = frozenset({"env"})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


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
        from sagemeter.transport.ray_pool import check_address

        try:
            return check_address(value)
        except UserError as exc:
            raise ValueError(str(exc).removeprefix("--ray ")) from None

    @field_validator("levels", mode="before")
    @classmethod
    def _levels(cls, value: Any) -> Any:
        """`[1, 4, 16]`, or `"1,4,16"` as the command line writes it."""
        if isinstance(value, str):
            try:
                return [int(part) for part in value.split(",") if part.strip()]
            except ValueError:
                raise ValueError(f"{value!r}: give whole numbers, e.g. [1, 4, 16]") from None
        return value

    @field_validator("prefill_tokens", mode="before")
    @classmethod
    def _prefill_tokens(cls, value: Any) -> Any:
        """`[256, 4096]`, or `"256,4096"` / `"none"` as the command line writes it."""
        if isinstance(value, str):
            from sagemeter.settings import parse_prefill_tokens

            try:
                return parse_prefill_tokens(value, repr(value))
            except UserError as exc:
                raise ValueError(str(exc).removeprefix(f"{value!r} ")) from None
        return value

    @field_validator("timeout", "stall", "startup_timeout", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        """A number of seconds, or a duration such as "120s" or "500ms"."""
        from sagemeter.calibrate.timing import parse_duration

        if isinstance(value, str):
            try:
                return parse_duration(value, repr(value))
            except UserError as exc:
                raise ValueError(str(exc).removeprefix(f"{value!r} ")) from None
        return value

    def settings(self) -> MeasureSettings:
        """The MeasureSettings these options make; a bad value is one line naming its key."""
        overrides = {
            "short_tokens": self.short_tokens,
            "long_tokens": self.long_tokens,
            "decode_repeats": self.repeats,
            "prefill_tokens": self.prefill_tokens,
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
}


def _measure_key(field: str) -> str:
    """A MeasureSettings field as the plan spells it: `load_max_tokens` → `measure.load_tokens`."""
    return f"measure.{_MEASURE_KEYS.get(field, field)}"


class EstimateOptions(_Strict):
    """`[estimate]`: the assumptions behind `--dry-run`'s time and cost, and the spend cap check."""

    tokens_per_second: float = Field(
        50.0, gt=0, description="per stream (the article's bf16 Gemma 4 E2B on one L4: 51)"
    )
    deploy_minutes: float = Field(
        10.0, ge=0, description="create to InService (the article: about ten minutes)"
    )
    delete_minutes: float = Field(2.0, ge=0, description="delete request to gone")


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
    max_model_len: int = Field(DEFAULT_MAX_MODEL_LEN, ge=0, description="0 leaves it to vLLM")
    gpu_memory_utilization: float = Field(DEFAULT_GPU_MEMORY_UTILIZATION, ge=0, le=1)
    count: int = Field(1, ge=1, le=100)
    inference_ami: str | None = None
    startup_timeout: int = DEFAULT_STARTUP_TIMEOUT_S
    download_timeout: int = DEFAULT_DOWNLOAD_TIMEOUT_S
    provision_timeout: int | None = None
    deadline_minutes: float = Field(60.0, gt=0, description="stop waiting for InService after")

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
        description="ABA (the default for two arms), any string of arm letters starting with A, "
        "or interleaved",
    )
    price_per_hour: float | None = Field(None, gt=0)
    max_cost_usd: float | None = Field(None, gt=0)
    measure: MeasureOptions = Field(default_factory=MeasureOptions)
    estimate: EstimateOptions = Field(default_factory=EstimateOptions)
    arms: list[Arm] = Field(alias="arm", min_length=2)

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
        return self.measure.settings()

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


def plan_from_data(data: Mapping[str, Any], source: str) -> Plan:
    """A Plan from TOML (or JSON) data; the first problem is one UserError naming its key."""
    normalised = _normalised(dict(data))
    try:
        plan = Plan.model_validate(normalised)
    except ValidationError as exc:
        error = _first_error(exc)
        where = _where(normalised, tuple(error["loc"])) or str(
            error["loc"][0] if error["loc"] else ""
        )
        key = f"{where}: " if where else ""
        raise UserError(f"{source}: {key}{_message(error)}") from None
    check_plan(plan, source)
    return plan


def _first_error(exc: ValidationError) -> Any:
    """The error to show: an unknown or missing key before a wrong value, the shallowest first."""
    errors = exc.errors()
    rank = {"extra_forbidden": 0, "missing": 1}
    return min(errors, key=lambda e: (rank.get(e["type"], 2), len(e["loc"])))


def parse_plan(text: str, source: str = "plan") -> Plan:
    """A Plan from TOML text."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{source}: not valid TOML: {exc}") from None
    return plan_from_data(data, source)


def load_plan(path: Path) -> tuple[Plan, str]:
    """The plan in `path` and its text (copied into the run folder)."""
    from sagemeter.textfiles import PLAN_CAP, decode_utf8, read_capped

    try:
        raw = read_capped(path, PLAN_CAP)
    except UserError as exc:
        if path.is_dir():
            raise UserError(f"{path}: is a folder; give the plan's .toml file") from None
        if not path.exists() and not path.is_symlink():
            raise UserError(f"{path}: no such plan file") from None
        raise exc from None
    text = decode_utf8(path, raw)
    return parse_plan(text, str(path)), text


def check_plan(plan: Plan, source: str) -> None:
    """What pydantic cannot see alone: names that collide, the order, measure settings."""
    seen: dict[str, int] = {}
    for position, arm in enumerate(plan.arms, start=1):
        if arm.name in seen:
            raise UserError(
                f'{source}: arm[{position}].name: "{arm.name}" is already the name of '
                f"arm[{seen[arm.name]}]; every arm needs its own name"
            )
        seen[arm.name] = position
    endpoints: dict[str, str] = {}
    for arm in plan.arms:
        if arm.sagemaker is None:
            continue
        endpoint = plan.endpoint_name(arm)
        key = f'arm "{arm.name}".sagemaker.endpoint'
        if not SAGEMAKER_ENDPOINT_NAME.match(endpoint):
            raise UserError(
                f"{source}: {key}: {endpoint!r} is not a valid endpoint name (1-63 letters, "
                "digits, hyphens)"
            )
        if endpoint in endpoints:
            raise UserError(
                f'{source}: {key}: {endpoint!r} is also arm "{endpoints[endpoint]}"\'s endpoint; '
                "set `endpoint` to tell them apart"
            )
        endpoints[endpoint] = arm.name
    if plan.measure.ray is not None:
        for arm in plan.arms:
            if arm.deployed or isinstance(arm.parsed_target(), SageMakerTarget):
                raise UserError(
                    f'{source}: measure.ray: arm "{arm.name}" is a SageMaker endpoint, whose '
                    "batches go through boto3 on this machine; leave out ray"
                )
    order = plan.order_text
    if order != INTERLEAVED:
        _check_order(order, len(plan.arms), source)
    try:
        settings = plan.settings()
    except UserError as exc:
        raise UserError(f"{source}: {exc}") from None
    if plan.interleaved and (settings.fidelity_prompts or 0) > 0:
        raise UserError(
            f'{source}: measure.fidelity: not with order = "interleaved" (B is forced along '
            "A's answers, which exist only once A is measured); use an A-B-A order"
        )
    from sagemeter.experiment.steps import visits

    names: dict[str, str] = {}
    for visit in visits(plan):
        if visit.result_name in names and names[visit.result_name] != visit.arm.name:
            raise UserError(
                f'{source}: arm "{visit.arm.name}": its repeat would be called '
                f'{visit.result_name!r}, which is arm "{names[visit.result_name]}"\'s name'
            )
        names[visit.result_name] = visit.arm.name


def _check_order(order: str, arms: int, source: str) -> None:
    letters = [chr(ord("A") + i) for i in range(arms)]
    if not _ORDER.match(order):
        raise UserError(
            f"{source}: order: {order!r}: write the arms' letters in run order (e.g. ABA, ABAB) "
            f'or "{INTERLEAVED}"'
        )
    unknown = sorted(set(order) - set(letters))
    if unknown:
        raise UserError(
            f"{source}: order: {order!r} names arm {', '.join(unknown)}, but the plan has "
            f"{arms} arms ({', '.join(letters)})"
        )
    if order[0] != "A":
        raise UserError(f"{source}: order: {order!r} must start with A (the baseline, arm 1)")
    missing = [letter for letter in letters if letter not in order]
    if missing:
        raise UserError(f"{source}: order: {order!r} never measures arm {', '.join(missing)}")


def arm_kind(arm: Arm) -> Literal["sagemaker", "target"]:
    return "sagemaker" if arm.sagemaker is not None else "target"
