"""The demo: the source article's comparison on the embedded engine, in A-B-A order.

A is the 32-bit storage of SmolLM2-135M's weights, B the packed 4-bit file they came from, A'
the 32-bit file again, so the drift between A and A' shows how much of the A/B gap is noise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sagemeter.compare import Comparison, combine, save_comparison
from sagemeter.measure import ProgressFn
from sagemeter.report.writer import write_report
from sagemeter.settings import MeasureSettings, demo_settings, quick_settings
from sagemeter.targets import parse_target
from sagemeter.verbs import settings_with
from sagemeter.workflows import PhaseFn, measure_target, selected_questions, total_requests

# Given a run's name and its request count, returns that run's progress and phase callbacks.
RunProgressFactory = Callable[[str, int], tuple[ProgressFn, PhaseFn]]

DEMO_ORDER: tuple[tuple[str, str], ...] = (
    ("smollm2-f32", "local:smollm2-f32"),
    ("smollm2-q4_1", "local:smollm2-q4_1"),
    ("smollm2-f32-again", "local:smollm2-f32"),
)


def default_run_dir(root: Path = Path("runs")) -> Path:
    """runs/DATE-demo, or runs/DATE-HHMMSS-demo when that folder already holds a run."""
    now = datetime.now(UTC)
    candidate = root / f"{now:%Y-%m-%d}-demo"
    if candidate.exists() and any(candidate.iterdir()):
        candidate = root / f"{now:%Y-%m-%d-%H%M%S}-demo"
    return candidate


def demo_plan_settings(quick: bool, overrides: Mapping[str, Any] | None = None) -> MeasureSettings:
    """The demo's lengths (or the quick ones) with the user's question choices applied."""
    return settings_with(quick_settings() if quick else demo_settings(), overrides or {})


async def run_demo(
    run_dir: Path, settings: MeasureSettings, progress_for: RunProgressFactory
) -> tuple[list[Path], Comparison]:
    """Measure A, B, A' one after the other (each engine stopped before the next starts),
    combine them, and write the report (markdown, HTML, plots) into the run folder."""
    total = total_requests(settings, len(selected_questions(settings).questions))
    paths = []
    reference = None  # with fidelity on, A's record: B and A' are forced along its answers
    for name, target in DEMO_ORDER:
        advance, on_phase = progress_for(name, total)
        result, path = await measure_target(
            parse_target(target),
            name=name,
            settings=settings,
            out_dir=run_dir,
            progress=advance,
            on_phase=on_phase,
            fidelity_reference=reference,
        )
        if reference is None and result.detail is not None:
            reference = result.detail.fidelity
        paths.append(path)
    comparison = combine(paths)
    save_comparison(comparison, run_dir / "compare.json")
    await asyncio.to_thread(write_report, run_dir)
    return paths, comparison
