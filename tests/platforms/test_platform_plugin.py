"""A platform plug-in as its own distribution: docs/extending.md's example
(examples/platform-plugin) is installed beside sagemeter by pip, offline, into a folder of its
own, then a plan whose arms are `[arm.loopback]` tables runs through `sagemeter run`: each arm
deployed (a calibrate-server on 127.0.0.1), measured, priced and deleted, nothing left running,
and `--resume` after a `kill -9` adopting the server the killed run left.

The server's timing is known: a token every 2 ms is 500 tokens per second.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.busy_host import assert_whole_or_busy

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "platform-plugin"
pytestmark = pytest.mark.slow  # pip builds a distribution; each run starts servers

PLAN = """name = "loop"
order = "AB"

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

[[arm]]
name = "a"
[arm.loopback]
ttft = "TTFT"
itl = "2ms"
price_per_hour = 1.5

[[arm]]
name = "b"
[arm.loopback]
ttft = "TTFT"
itl = "2ms"
price_per_hour = 1.5
"""


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder where pip installed the example distribution (built from a copy of it)."""
    source = tmp_path_factory.mktemp("source") / "platform-plugin"
    shutil.copytree(EXAMPLE, source)
    site = tmp_path_factory.mktemp("site")
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    flags = ["--no-deps", "--no-build-isolation", "--no-index", "--target", str(site)]
    subprocess.run([*pip, *flags, str(source)], check=True, timeout=300)
    info = site / "sagemeter_loopback_platform-0.1.0.dist-info" / "entry_points.txt"
    assert "loopback = sagemeter_loopback_platform:LOOPBACK" in info.read_text()
    return site


@pytest.fixture
def env(plugin_site: Path, sagemeter_env: dict[str, str]) -> dict[str, str]:
    paths = [str(plugin_site), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**sagemeter_env, "PYTHONPATH": os.pathsep.join(paths), "COLUMNS": "200"}


def _sagemeter(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagemeter", *args],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=300, check=False,
    )  # fmt: skip


def _journal(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "journal.json").read_text())
    return data


def _running(pid: int) -> bool:
    """A calibrate-server with this pid still runs (a zombie or a reused pid does not count)."""
    try:
        return b"calibrate-server" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_a_plugin_platform_deploys_measures_prices_and_deletes(
    env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "plan.toml").write_text(PLAN.replace("TTFT", "10ms"))
    planned = _sagemeter(env, tmp_path, "run", "plan.toml", "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert "a calibrate-server on 127.0.0.1 (TTFT 10ms, ITL 2ms)" in planned.stdout
    assert "price of a: $1.5000/h (the loopback's fixed price)" in planned.stdout
    assert "quota" not in planned.stdout  # the example knows no quota (an optional member)

    done = _sagemeter(env, tmp_path, "run", "plan.toml", "--out", "run")
    assert done.returncode in (0, 3), done.stderr  # 3: a figure missing on a busy host
    journal = _journal(tmp_path / "run")
    assert journal["state"] == "done"
    deployments = journal["deployments"]
    assert [(d["arm"], d["platform"], d["state"]) for d in deployments] == [
        ("a", "loopback", "deleted"),
        ("b", "loopback", "deleted"),
    ]
    for deployment in deployments:
        assert deployment["hourly_usd"] == 1.5
        assert deployment["target"].startswith("http://127.0.0.1:")
        assert not _running(deployment["record"]["pid"])
        assert not Path(deployment["record"]["folder"]).exists()  # deleted means gone
    assert journal["cost_usd"] > 0
    arms = [json.loads((tmp_path / "run" / f"measure-{n}.json").read_text()) for n in "ab"]
    for arm in arms:  # exit 3 above: a figure missing, for a busy host's reason only
        assert_whole_or_busy(arm)
    assert any(arm["complete"] is False for arm in arms) == (done.returncode == 3), done.stderr
    result = arms[0]
    assert result["detail"]["environment"]["target"] == deployments[0]["target"]
    if result["decode_tokens_per_second"] is not None:
        assert result["decode_tokens_per_second"] == pytest.approx(500, rel=0.25)
    compared = json.loads((tmp_path / "run" / "compare.json").read_text())
    assert compared["price_per_hour"] == 1.5
    assert any(row["key"] == "usd_per_million_tokens_c2" for row in compared["rows"])
    assert "the price loopback billed" in " ".join(compared["warnings"])


def test_resume_after_kill_9_adopts_the_server_the_killed_run_left(
    env: dict[str, str], tmp_path: Path
) -> None:
    # A slow first token on arm a: the kill lands while a is measured, after its deploy (b,
    # deployed only on resume, answers at the other test's pace).
    (tmp_path / "plan.toml").write_text(PLAN.replace("TTFT", "150ms", 1).replace("TTFT", "10ms"))
    run = subprocess.Popen(
        [sys.executable, "-m", "sagemeter", "run", "plan.toml", "--out", "run"],
        env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    first: dict[str, Any] = {}
    while time.monotonic() < deadline and first.get("state") != "live":
        time.sleep(0.05)
        try:
            made = _journal(tmp_path / "run")["deployments"]
        except (OSError, ValueError, KeyError):
            continue
        first = made[0] if made else {}
    assert first.get("state") == "live", "the first arm was never deployed"
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=30)
    pid = first["record"]["pid"]
    assert _running(pid)  # left running, as a cloud endpoint is after a kill

    resumed = _sagemeter(env, tmp_path, "run", "--resume", "run")
    assert resumed.returncode in (0, 3), resumed.stderr
    assert f"{first['target']} is live from before: measuring it" in resumed.stderr
    journal = _journal(tmp_path / "run")
    assert journal["state"] == "done" and len(journal["sessions"]) == 2
    deployments = journal["deployments"]
    assert [d["arm"] for d in deployments] == ["a", "b"]  # a was adopted, not deployed again
    assert deployments[0]["record"]["pid"] == pid
    assert all(d["state"] == "deleted" for d in deployments)
    assert not any(_running(d["record"]["pid"]) for d in deployments)
    assert not any(Path(d["record"]["folder"]).exists() for d in deployments)
