"""Run every benchmark and keep its output in docs/benchmarks/ (markdown + JSON)."""

from __future__ import annotations

import json
import platform
from datetime import UTC, datetime
from pathlib import Path

from benchmarks import client_overhead, decode_agreement
from sagemeter.atomic import write_text_atomic
from sagemeter.workflows import host_cpu

OUT = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"


def main() -> None:
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    machine = f"{host_cpu()}, {platform.machine()}, Python {platform.python_version()}"
    for name, module in (
        ("client-overhead", client_overhead),
        ("decode-agreement", decode_agreement),
    ):
        result = module.run()
        result["measured_utc"] = stamp
        result["machine"] = machine
        write_text_atomic(OUT / f"{name}.json", json.dumps(result, indent=2) + "\n")
        markdown = module.to_markdown(result) + f"\nMeasured {stamp} on {machine}.\n"
        write_text_atomic(OUT / f"{name}.md", markdown)
        print(markdown)


if __name__ == "__main__":
    main()
