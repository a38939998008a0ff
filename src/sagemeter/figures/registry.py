"""Figures are plug-ins: every figure a result carries, sagemeter's own and other
distributions', found under the entry-point group `sagemeter.figures` (the entry point's name is
the figure's key, or a level family's name). The result's top level, `combine`'s rows, the
report's tables, the terminal's and the MCP replies read the figures and the level families
from here, so a figure is declared in one place. Each plug-in is loaded by the shared loader
(`sagemeter.plugins.load_one`).

A plug-in that cannot load, does not keep the `Figure` protocol, or takes the name of a built-in
figure or of another top-level key is left out with one line saying why (`problems`), which
`measure` and `combine` print among their warnings; the other figures are unaffected.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import entry_points
from typing import NamedTuple, TypeGuard

from sagemeter.figures.declaration import (
    Figure,
    LevelFamily,
    family_problem,
    level_of_key,
    problem_with,
)
from sagemeter.plugins import import_object, load_one
from sagemeter.results.model import Detail, MeasureResult

GROUP = "sagemeter.figures"
# sagemeter's own figures, also declared in its pyproject.toml: found even when the installed
# metadata is older than the source (an editable install not yet refreshed). Their order is the
# order of their rows.
BUILT_IN = {
    "weights_gib": "sagemeter.figures.builtin:WEIGHTS",
    "kv_cache_tokens": "sagemeter.figures.builtin:KV_CACHE",
    "load_seconds": "sagemeter.figures.builtin:LOAD_SECONDS",
    "decode_tokens_per_second": "sagemeter.figures.builtin:DECODE",
    "predicted_decode_tokens_per_gb": "sagemeter.figures.builtin:PREDICTED",
    "predicted_decode_ceiling_tokens_per_second": "sagemeter.figures.builtin:CEILING",
    "decode_measured_over_predicted_ceiling": "sagemeter.figures.builtin:MEASURED_OVER_CEILING",
    "per_call_fixed_cost_seconds": "sagemeter.figures.builtin:FIXED_COST",
    "engine_decode_tokens_per_second": "sagemeter.figures.builtin:ENGINE_DECODE",
    "ttft_median_ms": "sagemeter.figures.builtin:TTFT",
    "inter_token_latency_median_ms": "sagemeter.figures.builtin:INTER_TOKEN",
    "prefill_tokens_per_second": "sagemeter.figures.builtin:PREFILL",
    "ttft_long_prompt_ms": "sagemeter.figures.builtin:TTFT_LONG_PROMPT",
    "quality_correct": "sagemeter.figures.builtin:QUALITY_CORRECT",
    "slo_concurrency": "sagemeter.figures.builtin:SLO_CONCURRENCY",
    "slo_rate": "sagemeter.figures.builtin:SLO_RATE",
    "slo_tokens_per_second": "sagemeter.figures.builtin:SLO_THROUGHPUT",
    "usd_per_million_tokens_at_slo": "sagemeter.figures.builtin:SLO_COST",
}


# sagemeter's own level families (figures keyed by a level), in the order of each level's rows.
BUILT_IN_LEVELS = {
    "load_tokens_per_second": "sagemeter.figures.builtin_levels:LOAD",
    "long_prompt_tokens_per_second": "sagemeter.figures.builtin_levels:LONG_PROMPT",
    "long_prompt_ttft_p50_ms": "sagemeter.figures.builtin_levels:LONG_PROMPT_TTFT_P50",
    "long_prompt_ttft_p90_ms": "sagemeter.figures.builtin_levels:LONG_PROMPT_TTFT_P90",
    "usd_per_million_tokens": "sagemeter.figures.builtin_levels:LOAD_COST",
    "endpoint_model_latency_ms": "sagemeter.figures.builtin_levels:ENDPOINT_MODEL_LATENCY",
    "endpoint_overhead_latency_ms": "sagemeter.figures.builtin_levels:ENDPOINT_OVERHEAD_LATENCY",
    "endpoint_client_and_network_ms": (
        "sagemeter.figures.builtin_levels:ENDPOINT_CLIENT_AND_NETWORK"
    ),
    "endpoint_gpu_utilization_pct": "sagemeter.figures.builtin_levels:ENDPOINT_GPU_UTILIZATION",
}


class Loaded(NamedTuple):
    figures: tuple[Figure, ...]
    families: tuple[LevelFamily, ...]
    problems: tuple[str, ...]


def _keeps_protocol(plugin: object) -> TypeGuard[Figure | LevelFamily]:
    return isinstance(plugin, Figure | LevelFamily)


def _problem(name: str) -> Callable[[object], str | None]:
    """The one line saying why the object named `name` is neither a figure nor a family."""

    def why(plugin: object) -> str | None:
        found = (
            family_problem(plugin, name)
            if isinstance(plugin, LevelFamily)
            else problem_with(plugin, name)
        )
        return None if found is None else f"{found}; it is left out (see docs/extending.md)"

    return why


@functools.cache
def _loaded() -> Loaded:
    """Every figure and level family that loads (built-ins first, then plug-ins by name) and
    one line per plug-in left out."""
    found: list[Figure] = []
    families: list[LevelFamily] = []
    for name, where in BUILT_IN.items():
        figure = import_object(where)
        assert isinstance(figure, Figure) and figure.key == name, where
        found.append(figure)
    for name, where in BUILT_IN_LEVELS.items():
        family = import_object(where)
        assert isinstance(family, LevelFamily) and family.name == name, where
        families.append(family)
    problems: list[str] = []
    taken = set(MeasureResult.model_fields)
    own = BUILT_IN | BUILT_IN_LEVELS
    for point in sorted(entry_points(group=GROUP), key=lambda p: (p.name, p.value)):
        if point.name in own:
            if point.value != own[point.name]:
                problems.append(
                    f"the figure plug-in {point.name!r} ({point.value}) has the name of a "
                    "built-in figure; it is left out"
                )
            continue
        named = {f.key for f in found} | {f.name for f in families}
        if point.name in taken or point.name in named:
            problems.append(
                f"the figure plug-in {point.name!r} ({point.value}) has the name of another "
                "top-level key of a result; it is left out"
            )
            continue
        plugin = load_one(point.name, point.load, "figure", _keeps_protocol, _problem(point.name))
        if isinstance(plugin, str):
            problems.append(plugin)
        elif isinstance(plugin, LevelFamily):
            families.append(plugin)
        else:
            found.append(plugin)
    return Loaded(tuple(found), tuple(families), tuple(problems))


def figures(groups: Iterable[str] | None = None) -> list[Figure]:
    """Every figure installed, in row order; only those of `groups` when given."""
    wanted = None if groups is None else set(groups)
    return [f for f in _loaded().figures if wanted is None or f.group in wanted]


def problems() -> list[str]:
    """One line for each figure plug-in left out, and why."""
    return list(_loaded().problems)


def figure_named(key: str) -> Figure | None:
    return next((f for f in _loaded().figures if f.key == key), None)


def level_figures(groups: Iterable[str] | None = None) -> list[LevelFamily]:
    """Every level family installed, in row order; only those of `groups` when given."""
    wanted = None if groups is None else set(groups)
    return [f for f in _loaded().families if wanted is None or f.group in wanted]


def plugin_level_figures() -> list[LevelFamily]:
    """The level families of other distributions (sagemeter's own have their own tables)."""
    return [f for f in _loaded().families if f.name not in BUILT_IN_LEVELS]


def level_figure_named(name: str) -> LevelFamily | None:
    return next((f for f in _loaded().families if f.name == name), None)


def level_figure_of(key: str) -> tuple[LevelFamily, str] | None:
    """The family and level whose row `key` is (`load_c16_tokens_per_second`: the load
    family at 16), or None when `key` is no level's row."""
    for family in _loaded().families:
        if (level := level_of_key(family, key)) is not None:
            return family, level
    return None


def stored_levels(result: MeasureResult, family: LevelFamily) -> dict[str, float | None]:
    """The family's `{level: value}` as the result's top level holds it (a declared field or a
    plug-in's key); a value that is not a finite number reads as null."""
    if family.name in MeasureResult.model_fields:
        held = getattr(result, family.name)
    else:
        held = (result.model_extra or {}).get(family.name)
    if not isinstance(held, dict):
        return {}
    return {str(level): _finite(value) for level, value in held.items()}


def level_values(result: MeasureResult, family: LevelFamily) -> dict[str, float | None]:
    """The family's `{level: value}` of one result as the comparison and the report read it:
    off the result where the family says (`read`), else as its top level holds it."""
    read = getattr(family, "read", None)
    if read is None:
        return stored_levels(result, family)
    found = read(result)
    return {str(level): _finite(value) for level, value in found.items()}


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def stored_value(result: MeasureResult, figure: Figure) -> float | int | None:
    """The figure as the result's top level holds it (a declared field or a plug-in's key)."""
    if figure.key in MeasureResult.model_fields:
        value: float | int | None = getattr(result, figure.key)
        return value
    extra = (result.model_extra or {}).get(figure.key)
    if isinstance(extra, bool) or not isinstance(extra, int | float):
        return None
    return extra if math.isfinite(extra) else None


def value_of(result: MeasureResult, figure: Figure) -> float | None:
    """The figure of one result as the comparison and the report read it."""
    read = getattr(figure, "read", None)
    if read is not None:
        found: float | None = read(result)
        return found
    if not figure.stored:
        return _computed(figure, result.detail)[0] if result.detail is not None else None
    value = stored_value(result, figure)
    return None if value is None else float(value)


def top_level_figures(detail: Detail) -> tuple[dict[str, float | int | None], list[str]]:
    """Every stored figure computed from the measurement's records, rounded as declared, for the
    result's top level; and a warning for each plug-in figure that could not be computed."""
    values: dict[str, float | int | None] = {}
    warnings: list[str] = []
    for figure in figures():
        if not figure.stored:
            continue
        value, why = _computed(figure, detail)
        if why is not None:
            warnings.append(why)
        if value is not None and figure.integer:
            values[figure.key] = round(value)
        elif value is not None and figure.digits is not None:
            values[figure.key] = round(value, figure.digits)
        else:
            values[figure.key] = value
    return values, warnings


def top_level_levels(detail: Detail) -> tuple[dict[str, dict[str, float | None]], list[str]]:
    """Every plug-in level family computed from the records, rounded as declared, for the
    result's top level (sagemeter's own are written by the phases that measure them); and a
    warning for each that could not be computed."""
    values: dict[str, dict[str, float | None]] = {}
    warnings: list[str] = []
    for family in level_figures():
        if not family.stored or family.name in MeasureResult.model_fields:
            continue
        try:
            found = family.compute(detail)
        except Exception as exc:  # a plug-in's own computation error, whatever it is
            warnings.append(f"figure {family.name}: not computed ({type(exc).__name__}: {exc})")
            continue
        if found is None:
            continue
        if not isinstance(found, Mapping):
            warnings.append(f"figure {family.name}: not computed (its computation gave {found!r})")
            continue
        levels: dict[str, float | None] = {}
        for level, value in found.items():
            number = _finite(value)
            if value is not None and number is None:
                warnings.append(f"figure {family.name} at {level}: not computed (gave {value!r})")
            digits = family.digits
            rounded = number if number is None or digits is None else round(number, digits)
            levels[str(level)] = rounded
        values[family.name] = levels
    return values, warnings


def _computed(figure: Figure, detail: Detail) -> tuple[float | None, str | None]:
    """The figure's value, or None and why when its computation fails or is not a number (a
    failed computation is never a figure)."""
    try:
        value = figure.compute(detail)
    except Exception as exc:  # a plug-in's own computation error, whatever it is
        return None, f"figure {figure.key}: not computed ({type(exc).__name__}: {exc})"
    if value is None:
        return None, None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None, f"figure {figure.key}: not computed (its computation gave {value!r})"
    return float(value), None


def format_figure(figure: Figure | None, value: float | None) -> str:
    """A figure as the terminal prints it: no trailing zeros, integers with separators."""
    if value is None:
        return "-"
    if figure is not None and figure.integer:
        return f"{int(value):,}"
    if abs(value) < 1:
        return f"{value:.3g}"
    return f"{value:.2f}".rstrip("0").rstrip(".")


def reset() -> None:
    """Forget the figures found (after installing a plug-in in this process: tests)."""
    _loaded.cache_clear()
