"""Figures are plug-ins: every figure a result carries, sagemeter's own and other
distributions', found under the entry-point group `sagemeter.figures` (the entry point's name is
the figure's key). The result's top level, `combine`'s rows, the report's tables, the terminal's
and the MCP replies read the figures from here, so a figure is declared in one place.

A plug-in that cannot load, does not keep the `Figure` protocol, or takes the name of a built-in
figure or of another top-level key is left out with one line saying why (`problems`), which
`measure` and `combine` print among their warnings; the other figures are unaffected.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from importlib.metadata import entry_points

from sagemeter.figures.declaration import Figure, problem_with
from sagemeter.plugins import import_object
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
    "per_call_fixed_cost_seconds": "sagemeter.figures.builtin:FIXED_COST",
    "engine_decode_tokens_per_second": "sagemeter.figures.builtin:ENGINE_DECODE",
    "ttft_median_ms": "sagemeter.figures.builtin:TTFT",
    "inter_token_latency_median_ms": "sagemeter.figures.builtin:INTER_TOKEN",
    "prefill_tokens_per_second": "sagemeter.figures.builtin:PREFILL",
    "ttft_long_prompt_ms": "sagemeter.figures.builtin:TTFT_LONG_PROMPT",
}


@functools.cache
def _loaded() -> tuple[tuple[Figure, ...], tuple[str, ...]]:
    """Every figure that loads (built-ins first, then plug-ins by name) and one line per plug-in
    left out."""
    found: list[Figure] = []
    for name, where in BUILT_IN.items():
        figure = import_object(where)
        assert isinstance(figure, Figure) and figure.key == name, where
        found.append(figure)
    problems: list[str] = []
    taken = set(MeasureResult.model_fields)
    for point in sorted(entry_points(group=GROUP), key=lambda p: (p.name, p.value)):
        if point.name in BUILT_IN:
            if point.value != BUILT_IN[point.name]:
                problems.append(
                    f"the figure plug-in {point.name!r} ({point.value}) has the name of a "
                    "built-in figure; it is left out"
                )
            continue
        if point.name in taken or any(f.key == point.name for f in found):
            problems.append(
                f"the figure plug-in {point.name!r} ({point.value}) has the name of another "
                "top-level key of a result; it is left out"
            )
            continue
        try:
            figure = point.load()
        except Exception as exc:  # a plug-in's own import error, whatever it is
            problems.append(
                f"the figure plug-in {point.name!r} could not be loaded: "
                f"{type(exc).__name__}: {exc}"
            )
            continue
        if (why := problem_with(figure, point.name)) is not None:
            problems.append(f"{why}; it is left out (see docs/extending.md)")
            continue
        found.append(figure)
    return tuple(found), tuple(problems)


def figures(groups: Iterable[str] | None = None) -> list[Figure]:
    """Every figure installed, in row order; only those of `groups` when given."""
    wanted = None if groups is None else set(groups)
    return [f for f in _loaded()[0] if wanted is None or f.group in wanted]


def problems() -> list[str]:
    """One line for each figure plug-in left out, and why."""
    return list(_loaded()[1])


def figure_named(key: str) -> Figure | None:
    return next((f for f in _loaded()[0] if f.key == key), None)


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
