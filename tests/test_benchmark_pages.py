"""The benchmark pages (`make benchmarks`, docs/benchmarks/): a figure the run could not measure
is shown as none with its reason, and a page that fails to render leaves the old pair whole."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest
from benchmarks import decode_agreement, run_all

NEGATIVE = (
    "no per-call fixed cost: the two lengths put it at -3.0 ms, below zero (tokens grew slower "
    "with the reply's length)"
)


def _row(fixed: float | None, problem: str | None) -> dict[str, Any]:
    return {
        "differential_tokens_per_second": 64.0,
        "least_squares_tokens_per_second": 63.2,
        "engine_tokens_per_second_median": 64.1,
        "engine_tokens_per_second_min": 56.3,
        "engine_tokens_per_second_max": 68.2,
        "relative_difference": -0.0013,
        "per_call_fixed_cost_s": fixed,
        "per_call_fixed_cost_problem": problem,
        "long_reply_seconds": [8.0],
    }


def test_a_fixed_cost_the_run_refused_is_none_with_its_reason() -> None:
    page = decode_agreement.to_markdown(
        {
            "target_relative_difference": 0.03,
            "checkpoints": {"q4": _row(0.0045, None), "f32": _row(None, NEGATIVE)},
        }
    )
    rows = {
        line.split("|")[1].strip(): line
        for line in page.splitlines()
        if "| q4 " in line or "| f32 " in line
    }
    assert rows["q4"].rstrip().endswith("| 0.0045 |")
    assert rows["f32"].rstrip().endswith(f"| none: {NEGATIVE} |")


def test_a_page_that_fails_to_render_writes_neither_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken.json").write_text('{"old": true}\n')
    (tmp_path / "broken.md").write_text("# old\n")

    def to_markdown(result: dict[str, Any]) -> str:
        raise TypeError("unsupported format string passed to NoneType.__format__")

    broken = types.SimpleNamespace(run=lambda: {"figure": None}, to_markdown=to_markdown)
    monkeypatch.setattr(run_all, "OUT", tmp_path)
    monkeypatch.setitem(run_all.BENCHMARKS, "broken", broken)
    with pytest.raises(TypeError):
        run_all.main(["broken"])
    assert (tmp_path / "broken.json").read_text() == '{"old": true}\n'
    assert (tmp_path / "broken.md").read_text() == "# old\n"
