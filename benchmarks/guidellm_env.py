"""guidellm at one pinned version, in a venv of its own: how to install it, call it, read it.

guidellm is what the side-by-side benchmark compares against, never a dependency of sagemeter,
so it lives in its own venv in sagemeter's cache dir (made on first use only; deleting it costs
a reinstall). Offline it needs a data file: JSONL rows of `prompt` and `output_tokens_count`.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

from sagemeter.paths import cache_dir

GUIDELLM_VERSION = "0.8.1"

# Nothing may be fetched from a model hub at run time (the data file is local; usage from the
# server gives the token counts, so no tokenizer is loaded).
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def venv_dir() -> Path:
    return cache_dir() / f"guidellm-{GUIDELLM_VERSION}-venv"


def guidellm_command() -> list[str]:
    """The argv prefix that runs the pinned guidellm, installing it first when missing."""
    root = venv_dir()
    python = root / "bin" / "python"
    marker = root / ".installed"
    if not marker.exists() or marker.read_text().strip() != GUIDELLM_VERSION:
        print(f"installing guidellm {GUIDELLM_VERSION} into {root} (once)", file=sys.stderr)
        venv.EnvBuilder(with_pip=True, clear=True).create(root)
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                f"guidellm=={GUIDELLM_VERSION}",
            ],
            check=True,
        )
        marker.write_text(GUIDELLM_VERSION + "\n")
    return [str(python), "-m", "guidellm"]


def guidellm_env() -> dict[str, str]:
    return {**os.environ, **OFFLINE_ENV}


def write_data_file(
    path: Path, concurrency: int, seconds: float, request_s: float, tokens: int
) -> None:
    """Enough rows that guidellm never runs out within `seconds` (it stops when data ends)."""
    rows = math.ceil(concurrency * (seconds + 5.0) / request_s * 1.5) + concurrency + 50
    row = json.dumps({"prompt": "Count slowly.", "output_tokens_count": tokens})
    path.write_text((row + "\n") * rows)


def run_argv(
    command: list[str], target: str, concurrency: int, seconds: float, data: Path, out: Path
) -> list[str]:
    """`guidellm run` at fixed concurrency for `seconds`, its JSON to `out`, no console."""
    return [
        *command,
        "run",
        "--backend",
        f"kind=openai_http,target={target},model=truth",
        "--profile",
        f"kind=concurrent,streams={concurrency}",
        "--constraint",
        f"kind=max_duration,seconds={seconds:g}",
        "--data",
        f"kind=json_file,path={data}",
        "--output",
        f"kind=json,path={out}",
        "--disable-console",
    ]


def read_result(path: Path) -> dict[str, Any]:
    """The figures guidellm's own summary table shows, from its JSON report.

    Output tokens/s is its "Server Throughput" figure: every output token (completed and
    incomplete requests) over the benchmark's duration. TTFT and ITL are medians over completed
    requests.
    """
    report = json.loads(path.read_text())
    benchmark = report["benchmarks"][0]
    metrics = benchmark["metrics"]
    return {
        "output_tokens_per_second": metrics["output_tokens_per_second"]["total"]["mean"],
        "ttft_median_s": metrics["time_to_first_token_ms"]["successful"]["median"] / 1000.0,
        "itl_median_s": metrics["inter_token_latency_ms"]["successful"]["median"] / 1000.0,
        "requests_completed": metrics["request_totals"]["successful"],
        "requests_incomplete": metrics["request_totals"]["incomplete"],
        "requests_errored": metrics["request_totals"]["errored"],
        "mean_concurrency": metrics["request_concurrency"]["total"]["mean"],
        "duration_s": benchmark["duration"],
        "warnings": [warning["message"] for warning in benchmark.get("warnings") or []],
        "version": report["metadata"]["guidellm_version"],
    }


if __name__ == "__main__":
    print(" ".join(guidellm_command()))
