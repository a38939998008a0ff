"""The client's own cost per call, against a loopback server that answers at once.

The article's client (the aws CLI) cost 0.56 s per call; `measure`'s calls go through the load
generator's transport and must stay under 1 ms median on loopback (the httpx client before it
took 3.4 ms for a streamed call) so it never shows in what it measures. Measured for plain and
streamed calls, one at a time.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from sagemeter.transport.chat import ChatRequest
from sagemeter.transport.openai import OpenAIChat

CALLS = 2000
WARMUP = 50


def _start_server() -> tuple[subprocess.Popen[bytes], str]:
    port_file = Path(tempfile.mkstemp(prefix="instant-port-")[1])
    port_file.write_text("")
    process = subprocess.Popen([sys.executable, "-m", "benchmarks.instant_server", str(port_file)])
    deadline = time.monotonic() + 20
    while not port_file.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    return process, f"http://127.0.0.1:{port_file.read_text()}/v1"


async def _time_calls(url: str, request: ChatRequest, calls: int) -> tuple[list[float], float]:
    """Wall time of each call, and the client process's CPU seconds per call."""
    async with OpenAIChat(url, model="instant") as client:
        for _ in range(WARMUP):
            await client.chat(request)
        durations = []
        cpu_before = time.process_time()
        for _ in range(calls):
            record = await client.chat(request)
            assert record.ok, record.error
            durations.append(record.total_s)
        cpu_per_call = (time.process_time() - cpu_before) / calls
    return durations, cpu_per_call


def _summary(measured: tuple[list[float], float]) -> dict[str, float]:
    durations, cpu_per_call = measured
    array = np.asarray(durations) * 1000.0
    return {
        "client_cpu_ms_per_call": cpu_per_call * 1000.0,
        "calls": float(array.size),
        "median_ms": float(np.median(array)),
        "p90_ms": float(np.percentile(array, 90)),
        "p99_ms": float(np.percentile(array, 99)),
        "min_ms": float(array.min()),
        "max_ms": float(array.max()),
    }


def run(calls: int = CALLS) -> dict[str, Any]:
    process, url = _start_server()
    try:
        cases = {
            "plain, 16 tokens": ChatRequest(prompt="x", max_tokens=16, stream=False),
            "streamed, 16 chunks": ChatRequest(prompt="x", max_tokens=16, stream=True),
            "streamed, 256 chunks": ChatRequest(prompt="x", max_tokens=256, stream=True),
        }
        results = {
            name: _summary(asyncio.run(_time_calls(url, request, calls)))
            for name, request in cases.items()
        }
    finally:
        process.kill()
        process.wait()
    return {
        "target_median_ms": 1.0,
        "previous_client_streamed_16_median_ms": 3.39,
        "article_client_cost_ms": 562.0,
        "cases": results,
    }


def to_markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Client overhead per call (loopback, server answers at once)",
        "",
        f"Target: median under {result['target_median_ms']:g} ms; the httpx client `measure` "
        f"used before took {result['previous_client_streamed_16_median_ms']:g} ms for a "
        "streamed 16-token call; the article's aws CLI paid "
        f"{result['article_client_cost_ms']:.0f} ms per call.",
        "",
        "Wall time is send to last byte, so it includes the loopback server's own turn; the "
        "client's CPU per call is what the client itself spends.",
        "",
        "| call | calls | median ms | p90 ms | p99 ms | min ms | max ms | client CPU ms/call "
        "| median vs aws CLI |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, row in result["cases"].items():
        ratio = result["article_client_cost_ms"] / row["median_ms"]
        lines.append(
            f"| {name} | {row['calls']:.0f} | {row['median_ms']:.3f} | {row['p90_ms']:.3f} | "
            f"{row['p99_ms']:.3f} | {row['min_ms']:.3f} | {row['max_ms']:.3f} | "
            f"{row['client_cpu_ms_per_call']:.3f} | {ratio:,.0f}× less |"
        )
    return "\n".join(lines) + "\n"
