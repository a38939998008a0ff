"""The `long` marker: with `--dist loadfile` the marked modules are handed out first, longest first.

An inner pytest run on one xdist worker (which then runs the modules in the order they are
handed out) with tests/long_modules.py and the flags `scripts/test-tier` gives a loadfile part:
each inner test logs its name as it runs. The marked modules come first, the longest first, the
rest by their number of tests, each module whole; without `--no-loadscope-reorder` the order is
pytest's own.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ("pytester",)
# Slow: each case is an inner pytest run on an xdist worker (about 2 CPU-s each); the order it
# checks is the slow tier's.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def _inner_file(log: Path, name: str, count: int, seconds: int | None, dropped: int = 0) -> str:
    """A module of `count` tests that log `name`, and `dropped` more that `-m` leaves out."""
    mark = f"pytestmark = pytest.mark.long({seconds})\n" if seconds is not None else ""
    return f"""
import os
import pytest

{mark}
@pytest.mark.parametrize("n", range({count}))
def test_{name}(n):
    fd = os.open({str(log)!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, b"{name}\\n")
    os.close(fd)


@pytest.mark.dropped
@pytest.mark.parametrize("n", range({dropped}))
def test_{name}_dropped(n):
    pass
"""


def _run_order(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    *args: str,
    dropped_in_b: int = 0,
    passed: int = 9,
) -> list[str]:
    log = pytester.path / "order.log"
    log.unlink(missing_ok=True)
    pytester.makeini(
        "[pytest]\nmarkers =\n    long(seconds): runs long\n    dropped: left out by -m\n"
    )
    pytester.makepyfile(
        test_a=_inner_file(log, "a", 1, None),
        test_b=_inner_file(log, "b", 1 if dropped_in_b else 3, None, dropped_in_b),
        test_c=_inner_file(log, "c", 1, 50),
        test_d=_inner_file(log, "d", 2, 300),
        test_e=_inner_file(log, "e", 2, None),
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    result = pytester.runpytest_subprocess(
        "-p", "tests.long_modules", "-p", "no:cacheprovider", *args
    )
    assert result.parseoutcomes()["passed"] == passed, result.stdout.str()
    return log.read_text().split()


def test_long_modules_go_first_longest_first_under_loadfile(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    order = _run_order(
        pytester, monkeypatch, "-n", "1", "--dist", "loadfile", "--no-loadscope-reorder"
    )
    assert order == ["d", "d", "c", "b", "b", "b", "e", "e", "a"]


def test_the_rest_go_by_the_tests_that_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `-m`, a module's count is of its selected tests (as xdist's own order counts): b's
    three tests, two of them left out, come after e's two and, tied with a, in collection
    order."""
    order = _run_order(
        pytester, monkeypatch, "-n", "1", "--dist", "loadfile", "--no-loadscope-reorder",
        "-m", "not dropped", dropped_in_b=2, passed=7,
    )  # fmt: skip
    assert order == ["d", "d", "c", "e", "e", "a", "b"]


def test_other_runs_keep_pytests_order(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    order = _run_order(pytester, monkeypatch, "-n", "1", "--dist", "load")
    assert order == ["a", "b", "b", "b", "c", "d", "d", "e", "e"]
    order = _run_order(pytester, monkeypatch, "-p", "no:xdist")
    assert order == ["a", "b", "b", "b", "c", "d", "d", "e", "e"]
