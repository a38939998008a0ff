"""The known-truth server's slot limit and arrival log, over real sockets.

With --slots k, k requests sent together start at once and the k+1-th waits for the first slot to
free: its first token comes no earlier than one whole reply plus a TTFT after it arrived. The
arrival log has one line per request, in the order the server read them, and says which one
queued and how long.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.slots import SlotGate, SlotSink

TIMING = TruthTiming(ttft_s=0.03, itl_s=0.005)
# The slot test's replies: the three requests must all arrive within the first reply, and on a
# busy host (three workers on two cores) a thread's new client took over 80 ms to send: a reply of
# 0.45 s keeps them inside it by a wide margin.
SLOT_TIMING = TruthTiming(ttft_s=0.05, itl_s=0.02)
TOKENS = 20
REPLY_S = SLOT_TIMING.request_seconds(TOKENS)  # 0.45 s


def _first_token_after(url: str, results: list[float], at: int) -> None:
    body = {"model": "m", "max_tokens": TOKENS, "stream": True}
    with httpx.Client(base_url=url, timeout=10) as client:
        start = time.perf_counter()
        with client.stream("POST", "/v1/chat/completions", json=body) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if line.startswith("data: ") and not results[at]:
                    results[at] = time.perf_counter() - start


def test_the_request_past_the_slots_waits_for_a_whole_reply(tmp_path: Path) -> None:
    log = tmp_path / "arrivals.jsonl"
    with running_truth_server(SLOT_TIMING, slots=2, arrival_log=log) as url:
        httpx.get(url + "/health", timeout=5)  # connected once: the server is up
        ttfts = [0.0, 0.0, 0.0]
        threads = [
            threading.Thread(target=_first_token_after, args=(url, ttfts, i)) for i in range(3)
        ]
        for thread in threads:
            thread.start()
            time.sleep(0.005)  # all well inside the first reply
        for thread in threads:
            thread.join()
        stats = httpx.get(url + "/stats", timeout=5).json()
    # Threads may reach the server in another order than started: the log says which queued.
    ttfts.sort()
    assert ttfts[0] >= SLOT_TIMING.ttft_s
    assert ttfts[1] < REPLY_S  # the first two to arrive were served at once
    assert stats["slots"] == 2
    assert stats["queued_total"] == 1
    assert stats["in_service"] == 0
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["request"] for line in lines[:2]] == [1, 2]
    assert len(lines) == 3
    queued = [line["queued_s"] for line in lines]
    assert queued[0] == queued[1] == 0.0
    # The third waited from its arrival until the first served reply ended (never less), and its
    # first token came a TTFT after that: the wait is in what the client saw.
    first_ends = min(lines[0]["arrived_unix"], lines[1]["arrived_unix"]) + REPLY_S
    assert queued[2] >= first_ends - lines[2]["arrived_unix"] - 1e-4
    assert queued[2] < first_ends - lines[2]["arrived_unix"] + 0.05
    assert ttfts[2] >= queued[2] + SLOT_TIMING.ttft_s - 1e-4
    assert lines[2]["started_unix"] - lines[2]["arrived_unix"] == pytest.approx(queued[2], abs=1e-5)
    # Lines come in the order the server read the requests. The arrival stamps are the kernel's:
    # a connection accepted after its bytes came can be read after one that came later, so two
    # sent 5 ms apart may carry stamps in the other order; all three came within the sending.
    arrivals = [line["arrived_unix"] for line in lines]
    assert max(arrivals) - min(arrivals) < REPLY_S


class _Conn:
    def __init__(self) -> None:
        self.closed = False
        self.finishes = 0

    def write(self, data: bytes) -> None:
        pass

    def finished(self) -> None:
        self.finishes += 1

    def close(self) -> None:
        self.closed = True


def test_a_slot_is_freed_once_and_a_gone_client_is_skipped_in_the_queue() -> None:
    soon: list[object] = []
    gate = SlotGate(1, lambda call: soon.append(call))
    started: list[tuple[str, float]] = []
    first, gone, third = _Conn(), _Conn(), _Conn()
    sinks = [SlotSink(conn, gate) for conn in (first, gone, third)]
    for name, sink in zip("abc", sinks, strict=True):
        gate.admit(sink, 1.0, lambda at, name=name: started.append((name, at)))
    assert started == [("a", 1.0)] and len(gate.waiting) == 2
    gone.closed = True
    sinks[0].finished()
    sinks[0].close()  # a second end of the same reply frees nothing more
    assert gate.in_service == 1 and len(soon) == 1
    soon.pop()()  # type: ignore[operator]
    assert [name for name, _ in started] == ["a", "c"] and started[1][1] > 1.0
    assert not gate.waiting


def test_slots_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        SlotGate(0, lambda call: None)


def test_the_arrival_log_holds_the_clients_true_send_times(
    tmp_path: Path, sagemeter_env: dict[str, str]
) -> None:
    """An open-loop run's every send, as the client recorded it, against the server's own
    record of each arrival: the same count, each within a few ms after its send."""
    log, out = tmp_path / "arrivals.jsonl", tmp_path / "r.json"
    with running_truth_server(TIMING, arrival_log=log) as url:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "sagemeter",
                "load",
                url,
                "--rate=40",
                "--duration=1s",
                "--max-tokens=4",
                "--workers=1",
                "--raw",
                f"--out={out}",
            ],
            capture_output=True,
            text=True,
            env=sagemeter_env,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    raw = json.loads(out.read_text())["raw"]
    sends = sorted(raw["wall_start"] + record["send_us"] * 1e-6 for record in raw["records"])
    arrivals = sorted(json.loads(line)["arrived_unix"] for line in log.read_text().splitlines())
    assert len(arrivals) == len(sends) > 20
    gaps = [arrived - sent for arrived, sent in zip(arrivals, sends, strict=True)]
    assert min(gaps) > -0.002  # never before it was sent (the two clocks' reading aside)
    assert max(gaps) < 0.010
