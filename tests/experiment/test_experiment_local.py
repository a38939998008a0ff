"""`sagemeter run` on the embedded engine, as a user runs it: a real subprocess, real engines.

A-B-A end to end; a `kill -9` after the first arm, then `--resume` (the first arm's file is kept
byte for byte); and the interleaved order, checked at the wire by two recording proxies in
front of the session's real engine.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.engines.ports import free_port
from sagemeter.platforms.deployment import parse_utc
from tests.busy_host import assert_whole_or_busy

pytestmark = [pytest.mark.slow, pytest.mark.long(110)]  # seconds (tests/long_modules.py)

SHORT = """
[measure]
short-tokens = 4
long-tokens = 24
repeats = 2
levels = [1, 2]
load-tokens = 8
batches = 1
questions-per-family = 1
quality-max-tokens = 8
prefill-tokens = "none"
"""

# One short/long decode pair per arm (decode is not what the A-B-A test checks; its drift line
# still has decode): 0.9 s less of its three engine arms.
LOCAL_PLAN = (
    'name = "smollm2-f32-vs-q4"\n'
    + SHORT.replace("repeats = 2", "repeats = 1")
    + """
[[arm]]
name = "f32"
target = "local:smollm2-f32"

[[arm]]
name = "q4"
target = "local:smollm2-q4_1"
"""
)


def truth_plan(url: str, top: str = "", measure: str = "") -> str:
    """Two arms on one known-truth server: a local plan that measures in seconds."""
    arms = f'\n[[arm]]\nname = "a"\ntarget = "{url}"\n\n[[arm]]\nname = "b"\ntarget = "{url}"\n'
    return 'name = "truth"\n' + top + SHORT + measure + arms


@pytest.fixture
def truth_url() -> Iterator[str]:
    with running_truth_server(TruthTiming(ttft_s=0.01, itl_s=0.002)) as url:
        yield url


def sagemeter(
    *args: str, home: Path, cwd: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagemeter", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "SAGEMETER_HOME": str(home), "COLUMNS": "200"},
        timeout=timeout,
        check=False,
    )


def journal_of(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "journal.json").read_text())
    return data


ARMS = ("f32", "q4", "f32-again")  # LOCAL_PLAN's measurements, in their order


def test_a_local_plan_runs_a_b_a_end_to_end(shared_home: Path, tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text(LOCAL_PLAN)
    planned = sagemeter("run", "plan.toml", "--dry-run", home=shared_home, cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    for label in ("measure f32", "measure q4", "measure f32-again", "combine", "report"):
        assert label in planned.stdout
    assert "nothing was created" in planned.stdout
    assert not (tmp_path / "runs").exists()

    began = time.monotonic()
    done = sagemeter("run", "plan.toml", "--out", "run", home=shared_home, cwd=tmp_path)
    wall = time.monotonic() - began
    # Exit 3: an arm lacks a figure, for a busy host's reason only (the client set the pace, or a
    # stall stayed), checked below; anything else fails at once, with no rerun of the whole plan.
    assert done.returncode in (0, 3), done.stderr
    run = tmp_path / "run"
    incomplete = []
    for name in ARMS:
        result = json.loads((run / f"measure-{name}.json").read_text())
        assert_whole_or_busy(result)
        if result["complete"] is False:
            incomplete.append(name)
        assert (run / f"engine-{name}.log").is_file()
    assert bool(incomplete) == (done.returncode == 3), done.stderr
    assert (run / "plan.toml").read_text() == LOCAL_PLAN
    comparison = json.loads((run / "compare.json").read_text())
    assert comparison["names"] == ["f32", "q4", "f32-again"]
    assert comparison["order"] == "ABA"
    assert comparison["drift"]["first"] == "f32" and comparison["drift"]["last"] == "f32-again"
    weights = {row["key"]: row for row in comparison["rows"]}["weights_gib"]["ratios"][0]
    assert 0.15 < weights < 0.2  # the same weights in a sixth of the bytes
    report = (run / "report.md").read_text()
    assert "Measured in the order ABA" in report
    assert (run / "report.html").is_file() and (run / "plots" / "throughput.png").is_file()
    journal = journal_of(run)
    assert journal["state"] == "done" and len(journal["sessions"]) == 1
    states = [step["state"] for step in journal["steps"]]
    assert states == [*("incomplete" if n in incomplete else "done" for n in ARMS), "done", "done"]
    assert all(step["elapsed_s"] is not None for step in journal["steps"])
    assert re.search(r"^\[3/5\] measure f32-again (done|incomplete) \(", done.stderr, re.M)
    assert "A-B-A drift (f32 → f32-again)" in done.stdout
    print(f"\nlocal A-B-A plan: {wall:.1f} s wall")


def test_kill_9_after_the_first_arm_then_resume_keeps_its_file(
    truth_url: str, tmp_path: Path
) -> None:
    """On the known-truth server (the journal's rules are the same for every target; the
    engines' own stop is the Ctrl-C test's)."""
    home = tmp_path / "home"
    (tmp_path / "plan.toml").write_text(truth_plan(truth_url))
    run = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "sagemeter", "run", "plan.toml", "--out", "run"],
        cwd=tmp_path,
        env={**os.environ, "SAGEMETER_HOME": str(home), "COLUMNS": "200"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    first = run / "measure-a.json"
    deadline = time.monotonic() + 300
    while not first.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    assert first.exists(), "the first arm was never measured"
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    kept = first.read_bytes()
    journal = journal_of(run)
    assert journal["state"] == "running"  # what a kill -9 leaves: the last whole journal
    assert not (run / "compare.json").exists()
    # The kill may land after the file is written and before the journal says so (a busy host
    # widens that window): make it that case every time, so resume must adopt the file.
    journal["steps"][0].update(state="running", note=None, ended_utc=None, elapsed_s=None)
    (run / "journal.json").write_text(json.dumps(journal))

    resumed = sagemeter("run", "--resume", "run", home=home, cwd=tmp_path)
    assert resumed.returncode in (0, 3), resumed.stderr  # 3: a figure missing on a busy host
    assert first.read_bytes() == kept  # never measured again
    journal = journal_of(run)
    assert journal["state"] == "done" and len(journal["sessions"]) == 2
    assert journal["sessions"][0]["outcome"] is None  # the killed one never said how it ended
    first_step = journal["steps"][0]
    assert first_step["state"] in ("done", "incomplete")  # incomplete: a busy host, as above
    assert first_step["note"].startswith("wrote measure-a.json")
    assert json.loads((run / "compare.json").read_text())["names"] == ["a", "b", "a-again"]
    again = sagemeter("run", "--resume", "run", home=home, cwd=tmp_path)
    assert again.returncode == 0 and "this run is done" in again.stdout


class RecordingProxy:
    """An OpenAI-compatible endpoint on loopback that forwards to the real engine and notes when
    each chat request began and ended, on one clock shared by every proxy."""

    def __init__(self, upstream: str, label: str, log: list[tuple[str, float, float]]) -> None:
        owner = self
        self.upstream = upstream.rstrip("/").removesuffix("/v1")
        self.label = label
        self.log = log
        self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                owner.forward(self, "GET")

            def do_POST(self) -> None:
                owner.forward(self, "POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def forward(self, request: BaseHTTPRequestHandler, method: str) -> None:
        began = time.monotonic()
        length = int(request.headers.get("Content-Length", 0))
        body = request.rfile.read(length) if length else None
        with httpx.stream(
            method,
            self.upstream + request.path,
            content=body,
            headers={"Content-Type": "application/json"},
            timeout=60,
        ) as upstream:
            request.send_response(upstream.status_code)
            request.send_header("Content-Type", upstream.headers.get("content-type", ""))
            request.send_header("Transfer-Encoding", "chunked")
            request.end_headers()
            ended = time.monotonic()
            for data in upstream.iter_raw():
                # The end is stamped before the reply's last bytes leave: a client that has read
                # them and sent its next request can then never seem to overlap this one, however
                # late this thread runs again on a busy host.
                ended = time.monotonic()
                request.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                request.wfile.flush()
        request.wfile.write(b"0\r\n\r\n")
        if method == "POST":
            with self.lock:
                self.log.append((self.label, began, ended))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxies(engine_url: str) -> Iterator[tuple[list[tuple[str, float, float]], str, str]]:
    log: list[tuple[str, float, float]] = []
    a, b = RecordingProxy(engine_url, "a", log), RecordingProxy(engine_url, "b", log)
    yield log, a.url, b.url
    a.close()
    b.close()


def test_interleaved_order_alternates_requests_at_the_wire(
    proxies: tuple[list[tuple[str, float, float]], str, str], tmp_path: Path
) -> None:
    log, url_a, url_b = proxies
    plan = (
        'name = "interleaved"\norder = "interleaved"\n'
        + SHORT
        + f'\n[[arm]]\nname = "a"\ntarget = "{url_a}"\n\n[[arm]]\nname = "b"\ntarget = "{url_b}"\n'
    )
    (tmp_path / "plan.toml").write_text(plan)
    done = sagemeter("run", "plan.toml", "--out", "run", home=tmp_path / "home", cwd=tmp_path)
    # Exit 3: done, but a figure is missing (on a busy 2-core host the client may be judged to
    # have set a batch's pace); what this test checks is the order requests were sent in.
    assert done.returncode in (0, 3), done.stderr
    assert (done.returncode == 3) == ("incomplete:" in done.stderr)
    run = tmp_path / "run"
    comparison = json.loads((run / "compare.json").read_text())
    assert comparison["order"] == "interleaved" and comparison["names"] == ["a", "b"]
    assert comparison["drift"] is None  # no A' in this order
    assert "Measured interleaved" in (run / "report.md").read_text()

    # Consecutive requests to one arm form a run. While the other arm still has requests to
    # send, every run but an arm's first (its preflight: a plain and a streamed reply) must be
    # one turn: a single request, or one parallel batch (all sent before the first ended).
    log.sort(key=lambda entry: entry[1])
    runs: list[list[tuple[str, float, float]]] = []
    for entry in log:
        if runs and runs[-1][0][0] == entry[0]:
            runs[-1].append(entry)
        else:
            runs.append([entry])
    last_sent = {arm: max(began for label, began, _ in log if label == arm) for arm in "ab"}
    seen: set[str] = set()
    for run_of in runs:
        arm = run_of[0][0]
        other = "b" if arm == "a" else "a"
        if arm not in seen:
            seen.add(arm)
            assert len(run_of) == 2, run_of  # the preflight
        elif run_of[0][1] < last_sent[other]:
            first_end = min(ended for _, _, ended in run_of)
            assert all(began < first_end for _, began, _ in run_of), run_of
    assert [run_of[0][0] for run_of in runs[:2]] == ["a", "b"]
    for before, after in itertools.pairwise(runs):
        assert after[0][1] >= max(ended for _, _, ended in before)  # no overlap
    assert sum(1 for run_of in runs if run_of[0][0] == "a") >= 10
    journal = journal_of(run)
    assert journal["steps"][0]["label"] == "measure a, b (interleaved)"
    assert "sent in turn" in journal["steps"][0]["note"]


def _engine_children(pid: int) -> list[int]:
    """The embedded-engine processes process `pid` started."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if parent == pid and b"llamacpp_worker" in command:
            found.append(int(stat.parent.name))
    return found


def test_ctrl_c_while_measuring_stops_the_engine_and_resume_finishes(
    truth_url: str, shared_home: Path, tmp_path: Path
) -> None:
    """A is the known-truth server, B the embedded engine: Ctrl-C while B's engine runs."""
    from tests.mcp_helpers import alive

    arms = f'[[arm]]\nname = "a"\ntarget = "{truth_url}"\n\n'
    arms += '[[arm]]\nname = "q4"\ntarget = "local:smollm2-q4_1"\n'
    (tmp_path / "plan.toml").write_text('name = "truth-then-engine"\n' + SHORT + "\n" + arms)
    run = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "sagemeter", "run", "plan.toml", "--out", "run"],
        cwd=tmp_path,
        env={**os.environ, "SAGEMETER_HOME": str(shared_home), "COLUMNS": "200"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    engines: list[int] = []
    deadline = time.monotonic() + 300
    while not engines and time.monotonic() < deadline and process.poll() is None:
        engines = _engine_children(process.pid)
        time.sleep(0.05)
    assert engines, "no engine was started"
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "Ctrl-C: stopping" in stderr and "stopped: Ctrl-C" in stderr
    assert "[2/5] measure q4 stopped" in stderr
    assert "Traceback" not in stderr
    assert not any(alive(pid) for pid in engines)
    assert (run / "measure-a.json").is_file() and not (run / "measure-q4.json").exists()
    journal = journal_of(run)
    assert journal["state"] == "stopped" and journal["steps"][1]["state"] == "stopped"

    resumed = sagemeter("run", "--resume", "run", home=shared_home, cwd=tmp_path)
    assert resumed.returncode in (0, 3), resumed.stderr  # 3: a figure missing on a busy host
    journal = journal_of(run)
    assert journal["state"] == "done" and journal["steps"][1]["state"] in ("done", "incomplete")
    short = [step["label"] for step in journal["steps"] if step["state"] == "incomplete"]
    assert bool(short) == (resumed.returncode == 3), (short, resumed.stderr)  # said as it ended
    assert (run / "measure-q4.json").is_file() and (run / "measure-a-again.json").is_file()


def test_every_step_line_of_a_local_plan_carries_the_cost_so_far(
    truth_url: str, tmp_path: Path
) -> None:
    (tmp_path / "plan.toml").write_text(truth_plan(truth_url, top="price_per_hour = 36.0\n"))
    done = sagemeter("run", "plan.toml", "--out", "run", home=tmp_path / "home", cwd=tmp_path)
    assert done.returncode in (0, 3), done.stderr  # 3: a figure missing on a busy host
    # A step that ended with a figure missing ends "incomplete", with its cost so far all the same.
    ended = re.findall(
        r"^\[(\d)/5\] .+ (done|incomplete) \(.*?, \$(\d+\.\d\d) so far\)", done.stderr, re.M
    )
    assert [index for index, _, _ in ended] == ["1", "2", "3", "4", "5"], done.stderr
    short = [index for index, state, _ in ended if state == "incomplete"]
    assert bool(short) == (done.returncode == 3), done.stderr
    for name in ("a", "b", "a-again"):  # and only for a busy host's reasons
        assert_whole_or_busy(json.loads((tmp_path / "run" / f"measure-{name}.json").read_text()))
    journal = journal_of(tmp_path / "run")
    assert journal["deployments"] == []
    measuring = [step for step in journal["steps"] if step["kind"] == "measure"]
    # No endpoint was deployed: each arm costs the plan's price for the time it was measured.
    seconds = sum(
        (parse_utc(step["ended_utc"]) - parse_utc(step["started_utc"])).total_seconds()
        for step in measuring
    )
    assert journal["cost_usd"] == pytest.approx(36.0 * seconds / 3600, abs=1e-4)
    assert float(ended[-1][2]) == pytest.approx(journal["cost_usd"], abs=0.006)
    costs = [float(cost) for _, _, cost in ended]
    assert costs == sorted(costs)


def test_a_plans_ray_address_is_joined_before_its_measure_step_sends_anything(
    truth_url: str, tmp_path: Path
) -> None:
    port = free_port()  # a port where nothing listens: no Ray cluster is needed
    plan = truth_plan(truth_url, measure=f'ray = "127.0.0.1:{port}"\n')
    (tmp_path / "plan.toml").write_text(plan)
    done = sagemeter("run", "plan.toml", "--out", "run", home=tmp_path / "home", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    refused = f"--ray 127.0.0.1:{port}: nothing answers at 127.0.0.1:{port}"
    assert "Traceback" not in done.stderr and refused in done.stderr
    assert "[1/5] measure a failed (" in done.stderr
    assert "cost not counted (no price_per_hour)" in done.stderr
    journal = journal_of(tmp_path / "run")
    assert journal["plan"]["measure"]["ray"] == f"127.0.0.1:{port}"
    assert journal["steps"][0]["state"] == "failed" and refused in journal["steps"][0]["note"]
    assert not (tmp_path / "run" / "measure-a.json").exists()
