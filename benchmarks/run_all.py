"""Run every benchmark and keep its output in docs/benchmarks/ (markdown + JSON)."""

from __future__ import annotations

import json
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path

from benchmarks import (
    client_overhead,
    decode_agreement,
    load_side_by_side,
    measure_truth,
    ray_overhead,
    sequential_quality,
    start_up,
)
from sagemeter.atomic import check_output_file, write_text_atomic
from sagemeter.measure.workflow import host_cpu

OUT = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"


BENCHMARKS = {
    "client-overhead": client_overhead,
    "decode-agreement": decode_agreement,
    "load-side-by-side": load_side_by_side,
    "measure-truth": measure_truth,
    "ray-overhead": ray_overhead,
    "sequential-quality": sequential_quality,
    "start-up": start_up,
}


def main(names: list[str]) -> None:
    """Run the named benchmarks (all when none are named); one run, one machine, one stamp."""
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        raise SystemExit(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(BENCHMARKS)}")
    for name in names or list(BENCHMARKS):  # the rewritten pages: checked before any run
        for suffix in (".json", ".md"):
            check_output_file(OUT / f"{name}{suffix}", "the benchmark page", force=True)
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    machine = f"{host_cpu()}, {platform.machine()}, Python {platform.python_version()}"
    for name in names or list(BENCHMARKS):
        module = BENCHMARKS[name]
        result = module.run()
        result["measured_utc"] = stamp
        result["machine"] = machine
        # Both pages rendered before either is written: a page that fails to render leaves the
        # benchmark's previous pair as it was, never a new JSON beside an old page.
        data = json.dumps(result, indent=2) + "\n"
        markdown = module.to_markdown(result) + f"\nMeasured {stamp} on {machine}.\n"
        write_text_atomic(OUT / f"{name}.json", data)
        write_text_atomic(OUT / f"{name}.md", markdown)
        print(markdown)


if __name__ == "__main__":
    main(sys.argv[1:])
