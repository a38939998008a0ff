"""The `quiet` marker: on several xdist workers, a quiet test never runs beside another test,
nor beside the tests of another pytest given the same turns folder.

An inner pytest run on two workers with tests/quiet_turns.py: each inner test logs when it
began and ended. The plain tests of the two plain files must overlap each other (the run was
parallel, so the checks below can fail), no quiet test may overlap any other test, and two
quiet tests in a row keep the turn: the other worker, which still has tests to run, starts none
between them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ("pytester",)
# Slow: an inner pytest run on two workers (about 6 s); `quiet` is the slow tier's marker.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
Span = tuple[float, float]


def _overlap(a: Span, b: Span) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _inner_file(log: Path, kind: str, count: int, quiet: bool) -> str:
    mark = "@pytest.mark.quiet\n" if quiet else ""
    return f"""
import os, time
import pytest

{mark}@pytest.mark.parametrize("n", range({count}))
def test_{kind}(n):
    began = time.monotonic()
    time.sleep(0.4)
    line = f"{kind}{{n}} {{began}} {{time.monotonic()}}\\n"
    fd = os.open({str(log)!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, line.encode())
    os.close(fd)
"""


def test_a_quiet_test_runs_while_no_other_worker_runs_a_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = pytester.path / "spans.log"
    pytester.makeini("[pytest]\nmarkers =\n    quiet: held off\n")
    # --dist loadfile: the first two files go to the two workers, the quiet file to the first
    # free one (after the short file), while the other still has most of its long file to run.
    pytester.makepyfile(
        test_a_short=_inner_file(log, "short", 2, quiet=False),
        test_b_long=_inner_file(log, "long", 8, quiet=False),
        test_c_quiet=_inner_file(log, "quiet", 2, quiet=True),
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    result = pytester.runpytest_subprocess(
        "-p", "tests.quiet_turns", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile"
    )
    assert result.parseoutcomes()["passed"] == 12, result.stdout.str()
    spans: dict[str, Span] = {}
    for line in log.read_text().splitlines():
        name, began, ended = line.split()
        spans[name] = (float(began), float(ended))
    plain = {name: span for name, span in spans.items() if not name.startswith("quiet")}
    assert len(plain) == 10 and {"quiet0", "quiet1"} <= set(spans)
    # Parallel: a short test ran beside a long one.
    assert any(_overlap(spans[f"short{n}"], other) for n in range(2) for other in plain.values())
    for name in ("quiet0", "quiet1"):
        others = [span for key, span in spans.items() if key != name]
        assert not any(_overlap(spans[name], other) for other in others), (name, spans)
    # The turn is kept from the first quiet test to the second, with long tests still to run.
    both = (spans["quiet0"][0], spans["quiet1"][1])
    assert not [name for name, span in plain.items() if _overlap(both, span)], spans
    assert max(span[1] for span in plain.values()) > both[1]


def test_a_quiet_test_holds_off_another_pytest_that_shares_the_turns_folder(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """`scripts/test-tier` runs a tier's `alone` tests in a pytest of their own beside the
    workers part, both given one SAGEMETER_TEST_TURNS: a quiet test on an xdist worker holds off
    the other pytest's tests too, and no pytest a test starts inherits the folder.

    The worker's first test waits until the other pytest has begun its 40 tests (16 s of them),
    so its quiet tests come while those still run, however slowly either pytest started."""
    log = pytester.path / "spans.log"
    begun = tmp_path / "beside-begun"
    pytester.makeini("[pytest]\nmarkers =\n    quiet: held off\n")
    workers = pytester.mkdir("workers")
    waiting = f"""
import time
from pathlib import Path


def test_0_waits_for_the_other_pytest():
    deadline = time.monotonic() + 60
    while not Path({str(begun)!r}).exists():
        assert time.monotonic() < deadline, "the other pytest never began"
        time.sleep(0.05)
"""
    (workers / "test_a_plain.py").write_text(waiting + _inner_file(log, "plain", 1, quiet=False))
    (workers / "test_b_quiet.py").write_text(_inner_file(log, "quiet", 2, quiet=True))
    beside = pytester.mkdir("beside")
    (beside / "test_beside.py").write_text(
        f"""
import os
from pathlib import Path


def test_0_begins():
    Path({str(begun)!r}).touch()
    with open({str(tmp_path / "inherited.txt")!r}, "w") as out:
        out.write(repr(os.environ.get("SAGEMETER_TEST_TURNS")))
"""
        + _inner_file(log, "beside", 40, quiet=False)
    )
    turns = tmp_path / "turns"
    turns.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "SAGEMETER_TEST_TURNS": str(turns),
    }
    common = ["-p", "tests.quiet_turns", "-p", "no:cacheprovider", "-q"]
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "pytest", *common, *extra],
            cwd=pytester.path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for extra in (["-n", "1", "workers"], ["beside"])
    ]
    try:
        outputs = [run.communicate(timeout=180)[0] for run in runs]
    finally:
        for run in runs:
            run.kill()
    assert [run.returncode for run in runs] == [0, 0], outputs
    spans: dict[str, Span] = {}
    for line in log.read_text().splitlines():
        name, began, ended = line.split()
        spans[name] = (float(began), float(ended))
    beside_spans = [span for name, span in spans.items() if name.startswith("beside")]
    assert len(beside_spans) == 40 and {"quiet0", "quiet1", "plain0"} <= set(spans)
    quiet = (spans["quiet0"][0], spans["quiet1"][1])  # the turn kept from one to the next
    # The other pytest ran before and after the quiet tests, never beside them.
    assert min(span[0] for span in beside_spans) < quiet[0], spans
    assert max(span[1] for span in beside_spans) > quiet[1], spans
    assert not [span for span in beside_spans if _overlap(quiet, span)], spans
    # Taken out of the environment: what the tests of that pytest (and the processes they
    # start) see.
    assert (tmp_path / "inherited.txt").read_text() == "None"
