"""guidellm and `sagemeter load` side by side, against a server whose timing is known.

Both tools run alternately (A-B at one level, B-A at the next, so drift hits both) against the
known-truth server (TTFT 50 ms, 4 ms per token, 256-token replies) at 1, 16, 32, 64 and 128
requests at once, about 20 s each. For each run: the tool's own output tokens/s and TTFT median
against the truth, its wall time, its CPU seconds per 1,000 tokens the server sent (the same
denominator for both tools), its peak RSS, and the server's own CPU share while it streamed.

Run `python -m benchmarks.load_side_by_side [--levels 1,16] [--seconds 5]` for a quick look;
benchmarks/run_all.py runs the full version.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks import guidellm_env
from sagemeter.calibrate import TruthTiming, running_truth_server

LEVELS = (1, 16, 32, 64, 128)
SECONDS = 20.0
TOKENS = 256
TIMING = TruthTiming(ttft_s=0.05, itl_s=0.004)
TOOLS = ("guidellm", "sagemeter")
STATS_EVERY_S = 0.5
TIMEOUT_GRACE_S = 300.0
LATENESS_NOTE_MS = 1.0  # server lateness worth a note under the tables


def _stats(url: str) -> dict[str, Any]:
    result: dict[str, Any] = httpx.get(f"{url}/stats", timeout=10).json()
    return result


def _server_share(samples: list[dict[str, Any]]) -> dict[str, float]:
    """The server's CPU (cores) and timing over the samples between which tokens were sent."""
    active = [
        (before, after)
        for before, after in itertools.pairwise(samples)
        if after["tokens"] > before["tokens"]
    ]
    if not active:
        return {"server_cores": 0.0, "server_exact_lateness_ms": 0.0, "server_lateness_ms": 0.0}
    first, last = active[0][0], active[-1][1]
    seconds = last["uptime_s"] - first["uptime_s"]
    writes = last["writes"] - first["writes"]
    exact = last["exact_writes"] - first["exact_writes"]
    return {
        "server_cores": (last["cpu_seconds"] - first["cpu_seconds"]) / seconds,
        "server_lateness_ms": 1000 * (last["lateness_sum_s"] - first["lateness_sum_s"]) / writes,
        "server_exact_lateness_ms": (
            1000 * (last["exact_lateness_sum_s"] - first["exact_lateness_sum_s"]) / max(exact, 1)
        ),
    }


def _run_measured(
    argv: list[str], env: dict[str, str], url: str, timeout_s: float
) -> dict[str, Any]:
    """Run one tool; its process tree's CPU and peak RSS (wait4), and /stats samples meanwhile.

    wait4 gives the child's own usage plus that of every descendant it waited for, so the
    tools' worker processes count too; ru_maxrss is the largest single process (KiB on Linux).
    """
    samples = [_stats(url)]
    with tempfile.TemporaryFile() as output:
        started = time.monotonic()
        process = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        while True:
            # Not Popen.poll: it would reap the child and lose its resource usage.
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - started > timeout_s:
                os.killpg(process.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(process.pid, 0)
                break
            samples.append(_stats(url))
            time.sleep(STATS_EVERY_S)
        wall = time.monotonic() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        output.seek(0)
        tail = output.read()[-2000:].decode(errors="replace")
    samples.append(_stats(url))
    server_tokens = samples[-1]["tokens"] - samples[0]["tokens"]
    cpu = usage.ru_utime + usage.ru_stime
    return {
        "exit_code": process.returncode,
        "output_tail": tail,
        "wall_s": wall,
        "cpu_s": cpu,
        "server_tokens": server_tokens,
        "cpu_s_per_1000_tokens": 1000 * cpu / server_tokens if server_tokens else None,
        "peak_rss_mib": usage.ru_maxrss / 1024,
        **_server_share(samples),
    }


def _guidellm(
    command: list[str], url: str, level: int, seconds: float, folder: Path
) -> dict[str, Any]:
    data, out = folder / f"guidellm-{level}.jsonl", folder / f"guidellm-{level}.json"
    guidellm_env.write_data_file(data, level, seconds, TIMING.request_seconds(TOKENS), TOKENS)
    argv = guidellm_env.run_argv(command, url, level, seconds, data, out)
    run = _run_measured(argv, guidellm_env.guidellm_env(), url, seconds + TIMEOUT_GRACE_S)
    if run["exit_code"] == 0 and out.exists():
        run.update(guidellm_env.read_result(out))
    return run


def _sagemeter(url: str, level: int, seconds: float, folder: Path) -> dict[str, Any]:
    out = folder / f"sagemeter-{level}.json"
    argv = [
        sys.executable,
        "-m",
        "sagemeter",
        "load",
        url,
        "--concurrency",
        str(level),
        "--max-tokens",
        str(TOKENS),
        "--duration",
        f"{seconds:g}s",
        "--out",
        str(out),
    ]
    run = _run_measured(argv, dict(os.environ), url, seconds + TIMEOUT_GRACE_S)
    if run["exit_code"] == 0 and out.exists():
        result = json.loads(out.read_text())
        run.update(
            output_tokens_per_second=result["output_tokens_per_second"],
            ttft_median_s=result["ttft_s"]["median"],
            itl_median_s=result["itl_s"]["median"],
            requests_completed=result["requests_completed"],
            mean_concurrency=result["achieved_concurrency"],
            self_reported_cpu_s_per_1000_tokens=result["cpu_s_per_1000_tokens"],
            valid=result["valid"],
            problems=result["problems"],
        )
    return run


def _errors(run: dict[str, Any], level: int) -> None:
    truth_rate = TIMING.tokens_per_second(level, TOKENS)
    if "output_tokens_per_second" in run:
        run["tok_s_error_pct"] = 100 * (run["output_tokens_per_second"] / truth_rate - 1)
        run["ttft_error_pct"] = 100 * (run["ttft_median_s"] / TIMING.ttft_s - 1)
        run["itl_error_pct"] = 100 * (run["itl_median_s"] / TIMING.itl_s - 1)


def run(levels: tuple[int, ...] = LEVELS, seconds: float = SECONDS) -> dict[str, Any]:
    command = guidellm_env.guidellm_command()
    rows = []
    with tempfile.TemporaryDirectory(prefix="side-by-side-") as name:
        folder = Path(name)
        for index, level in enumerate(levels):
            order = TOOLS if index % 2 == 0 else TOOLS[::-1]
            row: dict[str, Any] = {
                "level": level,
                "truth_tok_s": TIMING.tokens_per_second(level, TOKENS),
                "order": list(order),
            }
            for tool in order:
                load_before = os.getloadavg()[0]
                # A fresh server per run: its counters and connections are that run's alone.
                with running_truth_server(TIMING) as url:
                    if tool == "guidellm":
                        measured = _guidellm(command, url, level, seconds, folder)
                    else:
                        measured = _sagemeter(url, level, seconds, folder)
                measured["load_average_before"] = load_before
                _errors(measured, level)
                row[tool] = measured
                print(
                    f"  {tool} at {level}: {_cell(measured, 'output_tokens_per_second')}",
                    file=sys.stderr,
                )
            rows.append(row)
    return {
        "truth": {"ttft_s": TIMING.ttft_s, "itl_s": TIMING.itl_s, "tokens": TOKENS},
        "seconds_per_run": seconds,
        "guidellm_version": guidellm_env.GUIDELLM_VERSION,
        "cpu_count": os.cpu_count(),
        "rows": rows,
    }


def _signed(value: float) -> str:
    return f"{value:+.1f}%".replace("-", "−")


def _cell(run: dict[str, Any], key: str) -> str:
    """A figure with its error vs truth, or why there is none."""
    if run.get("exit_code") != 0 or key not in run:
        return f"failed (exit {run.get('exit_code')})"
    if key == "output_tokens_per_second":
        text = f"{run[key]:,.0f} ({_signed(run['tok_s_error_pct'])})"
    else:
        text = f"{run[key] * 1000:.1f} ({_signed(run['ttft_error_pct'])})"
    return text if run.get("valid", True) else f"{text}, marked invalid"


def _plain(value: float | None, form: str) -> str:
    return "–" if value is None else format(value, form)


def to_markdown(result: dict[str, Any]) -> str:
    truth = result["truth"]
    lines = [
        "# guidellm and sagemeter load, side by side, against known truth",
        "",
        f"The known-truth server: TTFT {truth['ttft_s'] * 1000:g} ms, "
        f"{truth['itl_s'] * 1000:g} ms per token, {truth['tokens']}-token replies; closed loop, "
        f"{result['seconds_per_run']:g} s per run, guidellm {result['guidellm_version']}, "
        f"{result['cpu_count']} cores shared by the server, the tool and everything else. The "
        "tools ran alternately (A-B, then B-A at the next level). Truth tok/s = requests at "
        "once × tokens / (TTFT + tokens × ITL).",
        "",
        "## Output tokens per second (error vs truth)",
        "",
        "| requests at once | truth tok/s | guidellm | sagemeter |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['level']} | {row['truth_tok_s']:,.0f} | "
            f"{_cell(row['guidellm'], 'output_tokens_per_second')} | "
            f"{_cell(row['sagemeter'], 'output_tokens_per_second')} |"
        )
    lines += [
        "",
        f"## TTFT median, ms (error vs the truth, {truth['ttft_s'] * 1000:g} ms)",
        "",
        "| requests at once | guidellm | sagemeter |",
        "| ---: | ---: | ---: |",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['level']} | {_cell(row['guidellm'], 'ttft_median_s')} | "
            f"{_cell(row['sagemeter'], 'ttft_median_s')} |"
        )
    lines += [
        "",
        "## What each run cost",
        "",
        "CPU is the tool's whole process tree (user + system, from wait4) per 1,000 tokens the "
        "server sent; wall time is the whole command, start-up included; server cores is the "
        "server's own CPU while tokens flowed, from its GET /stats; server lateness is how late "
        "first tokens and reply ends left on average.",
        "",
        "| requests at once | tool | CPU s / 1,000 tokens | wall s | peak RSS MiB "
        "| server cores | server lateness ms |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in result["rows"]:
        for tool in TOOLS:
            run = row[tool]
            lines.append(
                f"| {row['level']} | {tool} | {_plain(run['cpu_s_per_1000_tokens'], '.3f')} | "
                f"{run['wall_s']:.1f} | {run['peak_rss_mib']:.0f} | "
                f"{run['server_cores']:.2f} | {run['server_exact_lateness_ms']:.2f} |"
            )
    behind = [
        f"{tool} at {row['level']} ({row[tool]['server_exact_lateness_ms']:.1f} ms)"
        for row in result["rows"]
        for tool in TOOLS
        if row[tool]["server_exact_lateness_ms"] > LATENESS_NOTE_MS
    ]
    if behind:
        lines += [
            "",
            f"The server itself fell behind by more than {LATENESS_NOTE_MS:g} ms on average "
            f"during: {', '.join(behind)}. A busy machine (the tool under test included) kept "
            "it from a core, so those runs' true TTFT was about that much longer than the "
            "figure used here: read their errors with that in mind.",
        ]
    problems = [
        f"- sagemeter at {row['level']}: {'; '.join(row['sagemeter']['problems'])}"
        for row in result["rows"]
        if row["sagemeter"].get("problems")
    ]
    if problems:
        lines += ["", "sagemeter's own warnings:", "", *problems]
    return "\n".join(lines) + "\n"


def _levels(text: str) -> tuple[int, ...]:
    levels = tuple(int(part) for part in text.split(",") if part.strip())
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError("give positive whole numbers, e.g. 1,16,64")
    return levels


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load_side_by_side")
    parser.add_argument("--levels", type=_levels, default=LEVELS, help="requests at once")
    parser.add_argument("--seconds", type=float, default=SECONDS, help="seconds per run")
    parser.add_argument("--json", type=Path, help="also write the result here")
    parser.add_argument("--force", action="store_true", help="replace --json if it exists")
    args = parser.parse_args(argv)
    from sagemeter.atomic import check_output_file, write_text_atomic
    from sagemeter.errors import UserError

    if args.json:  # checked before minutes of runs, by the rule every command follows
        try:
            check_output_file(args.json, "--json", force=args.force)
        except UserError as exc:
            parser.exit(2, f"error: {exc}\n")
    result = run(args.levels, args.seconds)
    if args.json:
        write_text_atomic(args.json, json.dumps(result, indent=2) + "\n")
    print(to_markdown(result))


if __name__ == "__main__":
    main()
