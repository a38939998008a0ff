"""An API key a server echoes split across SSE events is never stored or shown.

The truth server's `echo_key_split` fault sends the request's bearer key in pieces, one per
`delta.content` event: no event holds it, only the joined reply does. `measure` (decode, load,
quality answers) and `load` run against it with the key, and the key must appear in no file they
write and nowhere on the screen, while the echo itself is seen to have happened (a mask where
the answers were stored).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sagemeter.calibrate import TruthTiming, running_truth_server
from sagemeter.calibrate.faults import Faults
from sagemeter.calibrate.server import key_pieces

FAST = TruthTiming(ttft_s=0.005, itl_s=0.001)
KEY = "sk-SplitKey-Echo-4242"  # mixed case: a case-folded copy would show too


def _sagemeter(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env |= {"SAGEMETER_HOME": str(home), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "sagemeter", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def _leaks(text: str) -> list[str]:
    return [form for form in (KEY, KEY.lower(), KEY.upper()) if form in text]


def test_the_fault_splits_the_key_so_that_no_event_holds_it() -> None:
    pieces = key_pieces(KEY, 3)
    assert "".join(pieces) == KEY and len(pieces) == 3
    assert all(KEY not in piece and len(piece) < len(KEY) for piece in pieces)
    assert key_pieces(KEY, 0) == [] and key_pieces("", 3) == []
    with pytest.raises(ValueError, match="at least 2"):
        Faults(echo_key_split=1)


@pytest.mark.slow
def test_a_key_echoed_in_pieces_is_never_written_or_shown(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with running_truth_server(FAST, faults=Faults(echo_key_split=3)) as url:
        measured = _sagemeter(
            "measure", str(tmp_path / "m"), url, "--quick", "--levels", "1,2",
            "--api-key", KEY, home=home,
        )  # fmt: skip
        loaded = _sagemeter(
            "load", url, "-c", "2", "--duration", "300ms", "--max-tokens", "64", "--raw",
            "--out", str(tmp_path / "load.json"), "--api-key", KEY, home=home,
        )  # fmt: skip
    assert measured.returncode in (0, 3), measured.stderr
    assert loaded.returncode in (0, 3), loaded.stderr  # 3: a loaded machine made it invalid
    assert (tmp_path / "load.json").is_file()
    for done in (measured, loaded):
        assert not _leaks(done.stdout + done.stderr), done.stdout + done.stderr
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert any(path.name.startswith("measure-") for path in written)
    for path in written:
        assert not _leaks(path.read_text(errors="replace")), path
    result = next((tmp_path / "m").glob("measure-*.json")).read_text()
    assert "***" in result  # the answers held the joined key, masked before the write
