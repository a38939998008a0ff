"""`sagemeter load` on one machine against the same load run through Ray (`--ray local`).

What Ray costs on a machine where both can run: the same worker processes, the same truth server
(TTFT 50 ms, 4 ms per token, 256-token replies), 64 and 128 at once, alternately (plain, Ray at
one level; Ray, plain at the next, so drift hits both). For each run: output tokens/s against
the truth, the start-up (command start to the common start instant: for Ray, joining a fresh
local cluster and placing the node agent), the whole command's wall time, the client's CPU per
1,000 tokens, its loop lag p99 and whether the run was valid.

Run `python -m benchmarks.ray_overhead [--levels 64] [--seconds 5]` for a quick look;
benchmarks/run_all.py runs the full version. Needs the `ray` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sagemeter.calibrate import TruthTiming, running_truth_server

LEVELS = (64, 128)
SECONDS = 10.0
TOKENS = 256
TIMING = TruthTiming(ttft_s=0.05, itl_s=0.004)
WAYS = ("one machine", "ray local")


def _one_run(url: str, level: int, seconds: float, way: str, folder: Path) -> dict[str, Any]:
    out = folder / f"{way.replace(' ', '-')}-{level}.json"
    command = [sys.executable, "-m", "sagemeter", "load", url, "-c", str(level)]
    command += ["--max-tokens", str(TOKENS), "--duration", f"{seconds}s", "--out", str(out)]
    if way == "ray local":
        command += ["--ray", "local"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["HOME"] = str(folder)  # whatever Ray might keep in ~/.ray stays in the scratch folder
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=env, timeout=seconds + 300)
    wall = time.perf_counter() - started
    result = json.loads(out.read_text())
    truth = TIMING.tokens_per_second(level, TOKENS)
    return {
        "way": way,
        "concurrency": level,
        "output_tokens_per_second": result["output_tokens_per_second"],
        "error_pct": (result["output_tokens_per_second"] - truth) / truth * 100,
        "ttft_median_ms": result["ttft_s"]["median"] * 1e3,
        "startup_s": result["self_awareness"]["startup_s"],
        "command_wall_s": wall,
        "cpu_s_per_1000_tokens": result["cpu_s_per_1000_tokens"],
        "loop_lag_p99_ms": (result["self_awareness"]["loop_lag_s"]["p99"] or 0.0) * 1e3,
        "workers": len(result["self_awareness"]["workers"]),
        "valid": result["valid"],
        "invalid_because": result["invalid_because"],
    }


def run(levels: tuple[int, ...] = LEVELS, seconds: float = SECONDS) -> dict[str, Any]:
    runs = []
    with (
        running_truth_server(TIMING) as url,
        tempfile.TemporaryDirectory(prefix="ray-bench-") as scratch,
    ):
        for number, level in enumerate(levels):
            order = WAYS if number % 2 == 0 else WAYS[::-1]
            for way in order:
                runs.append(_one_run(url, level, seconds, way, Path(scratch)))
    return {"seconds": seconds, "tokens": TOKENS, "runs": runs}


def to_markdown(result: dict[str, Any]) -> str:
    lines = [
        "# One machine against Ray (`--ray local`) on the same machine",
        "",
        f"Known-truth server (TTFT 50 ms, 4 ms per token), {result['tokens']}-token replies, "
        f"{result['seconds']:g} s per run.",
        "",
        "| at once | way | tok/s | error % | TTFT ms | start-up s | command s | CPU s / 1k tok "
        "| loop lag p99 ms | workers | valid |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in result["runs"]:
        lines.append(
            f"| {r['concurrency']} | {r['way']} | {r['output_tokens_per_second']:,.0f} | "
            f"{r['error_pct']:+.2f} | {r['ttft_median_ms']:.2f} | {r['startup_s']:.2f} | "
            f"{r['command_wall_s']:.1f} | {r['cpu_s_per_1000_tokens']:.4f} | "
            f"{r['loop_lag_p99_ms']:.1f} | {r['workers']} | {'yes' if r['valid'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default=",".join(map(str, LEVELS)))
    parser.add_argument("--seconds", type=float, default=SECONDS)
    args = parser.parse_args()
    levels = tuple(int(part) for part in args.levels.split(","))
    print(to_markdown(run(levels, args.seconds)))


if __name__ == "__main__":
    main()
