"""The `quiet` marker: on several xdist workers, a quiet test never runs beside another test.

An inner pytest run on two workers with tests/quiet_turns.py: each inner test logs when it
began and ended. The plain tests of the two plain files must overlap each other (the run was
parallel, so the checks below can fail), no quiet test may overlap any other test, and two
quiet tests in a row keep the turn: the other worker, which still has tests to run, starts none
between them.
"""

from __future__ import annotations

import os
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
