"""The plan file: what an experiment compares, in which order, with which settings and limits.

A plan is TOML (`sagemeter run PLAN.toml`), or built in code (`demo`). It is checked whole before
anything starts, and every problem is reported at once, one line each naming its key (`arm
"qat".sagemaker.modle: unknown key`). Keys may be written with `_` or `-` (`long_tokens` or
`long-tokens`), except in `env`, whose keys are the container's variable names.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from sagemeter.bounds import MAX_DEADLINE_MINUTES, MAX_QUESTIONS
from sagemeter.engines.endpoints import check_target
from sagemeter.errors import SETTING_NAME, ManyProblems, UserError
from sagemeter.evidence.sequential import DEFAULT_BLOCK, planned_looks
from sagemeter.experiment.steps import visits
from sagemeter.limits import CostUsd, PricePerHour
from sagemeter.options.measure import MeasureOptions, SpeedStop
from sagemeter.options.slo import SloOptions
from sagemeter.platforms.registry import Facts, endpoint_facts, platform_named, platform_of
from sagemeter.questions import builtin_sets, load_question_set
from sagemeter.settings import (
    MeasureSettings,
)
from sagemeter.targets import Target, parse_target, run_in
from sagemeter.textfiles import PLAN_CAP, decode_utf8, read_capped

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


class StopOptions(SpeedStop):
    """`[stop]`: when a phase may end before its fixed count (off unless set); the speed
    target's keys are `measure`'s options (`sagemeter.options.measure.SpeedStop`)."""

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


class Arm(_Strict):
    """One checkpoint compared: a target that already runs, or a platform table the run owns
    (`[arm.sagemaker]`, or a plug-in platform's `[arm.NAME]`: platforms/registry.py)."""

    name: str
    target: str | None = Field(
        None,
        description="http://HOST:PORT, NAME@REGION: used, never deleted; local:CHECKPOINT, "
        "vllm:CHECKPOINT: started for each visit and stopped after it",
    )
    _platform: str | None = PrivateAttr(None)
    _table: BaseModel | None = PrivateAttr(None)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not ARM_NAME.match(value):
            raise ValueError(
                f"{value!r}: use letters, digits, dots, dashes or underscores (at most 63)"
            )
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _platform_table(cls, data: Any, handler: ModelWrapValidatorHandler[Arm]) -> Arm:
        """A key naming an installed platform is that platform's table, validated by it."""
        if isinstance(data, Arm) or not isinstance(data, Mapping):
            return handler(data)
        tables = {key: value for key, value in data.items() if _is_platform_key(key)}
        arm = handler({key: value for key, value in data.items() if key not in tables})
        if len(tables) > 1:
            raise ValueError(f"give one platform table, not {len(tables)}: {', '.join(tables)}")
        if arm.target is None and not tables:
            raise ValueError(
                'give target = "…" (an endpoint that runs already) or an [arm.sagemaker] table'
            )
        if arm.target is not None and tables:
            raise ValueError(f"give target or an [arm.{next(iter(tables))}] table, not both")
        for key, value in tables.items():
            try:
                table = value if isinstance(value, BaseModel) else platform_of(key).table(value)
            except ValidationError as exc:  # located by plan_from_data (`_table_errors`)
                raise PydanticCustomError(
                    "platform_table", "[arm.{key}]: {error}", {"key": key, "error": str(exc)}
                ) from None
            arm._platform, arm._table = key, table
        return arm

    @model_serializer(mode="wrap")
    def _with_table(self, handler: SerializerFunctionWrapHandler, info: Any) -> Any:
        data = handler(self)
        if self._platform is not None and self._table is not None and isinstance(data, dict):
            data[self._platform] = self._table.model_dump(
                mode=info.mode, by_alias=True, exclude_defaults=info.exclude_defaults
            )
        return data

    @property
    def deployed(self) -> bool:
        """Whether the run creates (and deletes) this arm's endpoint, on its platform."""
        return self._platform is not None

    @property
    def platform(self) -> str | None:
        """The name of the platform the arm is deployed on (its table's), if any."""
        return self._platform

    @property
    def table(self) -> Any:
        """The arm's platform table, as its platform validated it."""
        return self._table

    def parsed_target(self) -> Target:
        assert self.target is not None
        return parse_target(self.target)


def _is_platform_key(key: object) -> bool:
    """A key of an arm that is none of its own and names an installed platform."""
    return isinstance(key, str) and key not in Arm.model_fields and platform_named(key) is not None


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

    def settings(self) -> MeasureSettings:
        """`[measure]`'s settings with `[stop]`'s speed target."""
        return self.measure.settings(self.stop)

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
    return _keys(str(error.get("msg", "invalid")).removeprefix("Value error, "))


def _keys(message: str) -> str:
    """A table's options named `{field}` (options that do not go together) as the plan writes
    them: the key, after the table the problem names (`slo: give ttft, tpot or both`)."""
    keys = set(SloOptions.model_fields) | set(MeasureOptions.model_fields)
    return SETTING_NAME.sub(lambda match: match[1] if match[1] in keys else match[0], message)


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
    errors = _table_errors(normalised)
    try:
        plan = Plan.model_validate(normalised)
    except ValidationError as exc:
        errors += [e for e in exc.errors() if e["type"] != "platform_table"]
    if errors:
        plan = None
        problems += _validation_problems(normalised, errors)
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


def _table_errors(data: Mapping[str, Any]) -> list[Any]:
    """Each platform table's own errors, located in the plan (`arm "qat".sagemaker.model`): a
    platform validates its table, so pydantic cannot locate them inside the arm alone."""
    errors: list[Any] = []
    arms = data.get("arm")
    for index, arm in enumerate(arms if isinstance(arms, list) else []):
        if not isinstance(arm, Mapping):
            continue
        for key, value in arm.items():
            if not _is_platform_key(key):
                continue
            if not isinstance(value, Mapping):
                where = ("arm", index, key)
                errors.append({"type": "dict_type", "loc": where, "msg": "write a table"})
                continue
            try:
                platform_of(key).table(value)
            except ValidationError as exc:
                errors += [{**e, "loc": ("arm", index, key, *e["loc"])} for e in exc.errors()]
    return errors


def _validation_problems(data: Mapping[str, Any], all_errors: list[Any]) -> list[str]:
    """Pydantic's errors as lines naming their keys: one per key (an unknown or missing key
    before a wrong value), in the plan's order."""
    rank = {"extra_forbidden": 0, "missing": 1}
    best: dict[str, Any] = {}
    errors, meant = _misspelt(all_errors)
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
    return arms, _valid_measure(data.get("measure", {}))


def _valid_measure(table: Any) -> MeasureOptions | None:
    """The [measure] table without its keys that are wrong (said among pydantic's problems),
    so that what running needs of the rest (the question set) is checked in the same run."""
    if not isinstance(table, Mapping):
        return None
    try:
        return MeasureOptions.model_validate(table)
    except ValidationError as exc:
        wrong = {error["loc"][0] for error in exc.errors() if error["loc"]}
    try:
        return MeasureOptions.model_validate({k: v for k, v in table.items() if k not in wrong})
    except ValidationError:
        return None


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
            if base is not None:
                parsed = run_in(parsed, str(base))  # where the run starts it
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
    """Each deployed arm as its platform would deploy it, checked without creating anything
    and without asking for credentials (what an account holds is checked when the run starts)."""
    problems = []
    for name, arms in deployed_by_platform(plan).items():
        try:
            platform_of(name).check(plan, arms, fresh=False, need_credentials=False)
        except ManyProblems as exc:
            problems += exc.problems
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
    for name, arms in deployed_by_platform(plan).items():
        problems += platform_of(name).plan_problems(plan, arms)
    if plan.measure.ray is not None:
        for arm in plan.arms:
            kind = _not_openai(arm)
            if kind is not None:
                problems.append(
                    f'measure.ray: arm "{arm.name}" is {kind}, whose '
                    "batches go through boto3 on this machine; leave out ray"
                )
    if plan.slo is not None:
        for arm in plan.arms:
            kind = _not_openai(arm)
            if kind is not None:
                problems.append(
                    f'slo: arm "{arm.name}" is {kind}, which answers through the '
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


def deployed_by_platform(plan: Plan) -> dict[str, list[Arm]]:
    """The arms the run deploys, by the name of the platform each is deployed on."""
    found: dict[str, list[Arm]] = {}
    for arm in plan.arms:
        if arm.platform is not None:
            found.setdefault(arm.platform, []).append(arm)
    return found


def _not_openai(arm: Arm) -> str | None:
    """What an arm is when it does not answer OpenAI's API (Ray batches and an SLO search need
    it), as its platform says (a deployed arm's, or a platform's endpoint target such as a
    SageMaker endpoint); None when it does."""
    facts = arm_facts(arm)
    return None if facts is None or facts.speaks_openai else facts.kind


def arm_facts(arm: Arm) -> Facts | None:
    """What the arm's platform says of it: a deployed arm's, else that of the platform whose
    endpoint its target is; None for a target of no platform (or one that does not parse,
    which is said elsewhere)."""
    if arm.platform is not None:
        return platform_of(arm.platform).facts(arm)
    try:
        return endpoint_facts(arm.parsed_target())
    except UserError:
        return None


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


def arm_kind(arm: Arm) -> str:
    """What an arm is: the name of the platform it is deployed on, or "target"."""
    return arm.platform or "target"
