"""An engine plug-in as its own distribution: docs/extending.md's example (examples/engine-plugin)
is built and installed beside sagemeter by pip, offline, then measured through its target prefix.

The example serves sagemeter's truth server, so the figures it gives are known: a token every
2 ms is 500 tokens per second.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "engine-plugin"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder where pip installed the example distribution (built from a copy of it)."""
    source = tmp_path_factory.mktemp("source") / "engine-plugin"
    shutil.copytree(EXAMPLE, source)
    site = tmp_path_factory.mktemp("site")
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    flags = ["--no-deps", "--no-build-isolation", "--no-index", "--target", str(site)]
    subprocess.run([*pip, *flags, str(source)], check=True, timeout=300)
    assert (site / "sagemeter_truth_engine-0.1.0.dist-info" / "entry_points.txt").is_file()
    return site


def _sagemeter(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sagemeter", *args],
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "200"},
        timeout=300,
    )


def _with_site(env: dict[str, str], site: Path) -> dict[str, str]:
    paths = [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}


def test_an_installed_engine_plugin_is_measured_by_its_prefix(
    plugin_site: Path, sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    env = _with_site(sagemeter_env, plugin_site)
    done = _sagemeter(env, "measure", str(tmp_path), "truth:20ms/2ms", "--quick", "--levels", "1,2")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "measure-truth-20ms-2ms.json").read_text())
    assert result["detail"]["environment"]["backend"] == "truth"
    assert result["detail"]["environment"]["target"] == "truth:20ms/2ms"
    assert result["decode_tokens_per_second"] == pytest.approx(500, rel=0.15)

    loaded = tmp_path / "load.json"
    # 48-token replies (114 ms): a closed loop's client gap must stay under 1% of a request
    # (CLOSED_GAP_SHARE_MAX), and a slow two-core host's 0.7 ms was 2% of an 8-token reply.
    args = ["-c", "2", "--max-tokens", "48", "--duration", "2s", "--out", str(loaded)]
    done = _sagemeter(env, "load", "truth:20ms/2ms", *args)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(loaded.read_text())["requests_failed"] == 0


def test_a_plugin_parses_its_own_targets_and_is_unknown_when_not_installed(
    plugin_site: Path, sagemeter_env: dict[str, str], tmp_path: Path
) -> None:
    env = _with_site(sagemeter_env, plugin_site)
    done = _sagemeter(env, "measure", str(tmp_path / "a"), "truth:20ms", "--quick")
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == "error: target 'truth:20ms': write truth:TTFT/ITL, e.g. truth:20ms/2ms"
    )
    done = _sagemeter(sagemeter_env, "measure", str(tmp_path / "b"), "truth:20ms/2ms", "--quick")
    assert done.returncode == 2 and "no engine is called 'truth'" in done.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_serve_reaches_a_plugin_engine_through_the_registry(
    plugin_site: Path, sagemeter_env: dict[str, str]
) -> None:
    """`serve` has no list of engines: the plug-in's `serving` starts the server, held until
    Ctrl-C, then stopped (exit 0), as the built-ins are."""
    env = _with_site(sagemeter_env, plugin_site)
    served = subprocess.Popen(
        [sys.executable, "-m", "sagemeter", "serve", "truth:20ms/2ms", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**env, "COLUMNS": "200"},
    )
    try:
        assert served.stdout is not None
        line = served.stdout.readline()
        match = re.fullmatch(r"serving truth-20ms-2ms at (http://127\.0\.0\.1:\d+/v1)\n", line)
        assert match, line
        assert served.stdout.readline().startswith("engine log: ")
        reply = httpx.post(
            f"{match.group(1)}/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
            timeout=10,
        )
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 4
        served.send_signal(signal.SIGINT)
        rest, _ = served.communicate(timeout=30)
        assert served.returncode == 0 and rest.strip().endswith("stopped"), rest
        with pytest.raises(httpx.HTTPError):  # the plug-in's server was stopped with serve
            httpx.get(f"{match.group(1)}/models", timeout=2)
    finally:
        if served.poll() is None:
            served.kill()
