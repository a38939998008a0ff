"""The demo: the source article's comparison on the embedded engine, in A-B-A order, as a
built-in experiment plan run the way `sagemeter run` runs any plan.

A is the 32-bit storage of SmolLM2-135M's weights, B the packed 4-bit file they came from, A'
the 32-bit file again, so the drift between A and A' shows how much of the A/B gap is noise.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sagemeter.errors import UserError
from sagemeter.experiment import Plan, default_run_dir, plan_from_data
from sagemeter.experiment.plan_toml import plan_toml
from sagemeter.options.command import Command, Variant
from sagemeter.options.measure import MEASURE, MeasureOptions
from sagemeter.settings import demo_settings, quick_settings

DEMO_ARMS: tuple[tuple[str, str], ...] = (
    ("smollm2-f32", "local:smollm2-f32"),
    ("smollm2-q4_1", "local:smollm2-q4_1"),
)

# The [measure] keys the demo's command-line options set.
DEMO_FLAGS = ("questions_per_family", "questions", "margin", "fidelity")

# `sagemeter demo`'s flags: measure's options of those names (their type, bounds and help),
# shown with the demo's defaults (`demo_settings`, or the quick ones with --quick).
DEMO = Command(
    "demo",
    models=(MeasureOptions,),
    defaults=demo_settings,
    build=MEASURE.build,
    variants=(Variant("quick", True, quick_settings),),
)


# The settings `demo_settings` sets that a plan's [measure] table holds.
DEMO_SETTINGS = (
    "short_tokens",
    "long_tokens",
    "decode_repeats",
    "prefill_tokens",
    "load_levels",
    "load_max_tokens",
    "load_batches",
    "quality_max_tokens",
    "fidelity_prompts",
)


def demo_measure_options() -> dict[str, Any]:
    """The demo's lengths as a plan's [measure] table (from `demo_settings`, the one source),
    each under its option's name (`decode_repeats` is `repeats`)."""
    settings = demo_settings()
    return {
        option.name: getattr(settings, option.setting)
        for option in MeasureOptions.options()
        if option.setting in DEMO_SETTINGS
    }


def demo_plan(quick: bool, overrides: Mapping[str, Any] | None = None) -> Plan:
    """The built-in plan: 32-bit, 4-bit, 32-bit again, at the demo's lengths (or the quick
    ones); `overrides` are [measure] keys (questions, questions_per_family, margin, fidelity)."""
    measure: dict[str, Any] = {"quick": True} if quick else demo_measure_options()
    measure.update({key: value for key, value in (overrides or {}).items() if value is not None})
    data = {
        "name": "demo",
        "order": "ABA",
        "measure": measure,
        "arm": [{"name": name, "target": target} for name, target in DEMO_ARMS],
    }
    try:
        return plan_from_data(data, "demo")
    except UserError as exc:  # the demo's options are flags: name the flag, not the plan key
        message = str(exc).removeprefix("demo: ")
        for key in DEMO_FLAGS:
            option = MEASURE.option(key)
            message = message.replace(option.spelled("plan"), option.spelled("cli"))
        raise UserError(message) from None


def demo_plan_text(plan: Plan) -> str:
    """The demo's plan as a TOML file for its run folder (`plan.toml`), so the demo can be run
    again, or changed, with `sagemeter run plan.toml`."""
    return plan_toml(
        plan.to_data(),
        "The demo's plan, as `sagemeter demo` ran it. Run it again (or edit it first) with\n"
        "  sagemeter run plan.toml",
    )


def demo_run_dir(root: Path = Path("runs")) -> Path:
    """runs/DATE-demo, or runs/DATE-HHMMSS-demo when that folder already holds a run."""
    return default_run_dir("demo", root)
