"""The `quiet` marker: on several xdist workers, a quiet test never runs beside another test.

An inner pytest run on two workers with tests/quiet_turns.py: each inner test logs when it
began and ended. The plain tests must overlap each other (the run was parallel, so the check
below can fail) and no quiet test may overlap any other test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parents[1]


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_a_quiet_test_runs_while_no_other_worker_runs_a_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = pytester.path / "spans.log"
    pytester.makeini("[pytest]\nmarkers =\n    quiet: held off\n")
    pytester.makepyfile(
        test_inner=f"""
        import os, time
        import pytest

        def _span(name):
            began = time.monotonic()
            time.sleep(0.6)
            line = f"{{name}} {{began}} {{time.monotonic()}}\\n"
            fd = os.open({str(log)!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.write(fd, line.encode())
            os.close(fd)

        @pytest.mark.parametrize("n", range(6))
        def test_plain(n):
            _span(f"plain{{n}}")

        @pytest.mark.quiet
        @pytest.mark.parametrize("n", range(2))
        def test_quiet(n):
            _span(f"quiet{{n}}")
        """
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    result = pytester.runpytest_subprocess(
        "-p", "tests.quiet_turns", "-p", "no:cacheprovider", "-n", "2", "--dist", "load"
    )
    assert result.parseoutcomes()["passed"] == 8, result.stdout.str()
    spans: dict[str, tuple[float, float]] = {}
    for line in log.read_text().splitlines():
        name, began, ended = line.split()
        spans[name] = (float(began), float(ended))
    plain = [span for name, span in spans.items() if name.startswith("plain")]
    quiet = {name: span for name, span in spans.items() if name.startswith("quiet")}
    assert len(plain) == 6 and len(quiet) == 2
    assert any(_overlap(a, b) for i, a in enumerate(plain) for b in plain[i + 1 :])
    for name, span in quiet.items():
        others = [other for key, other in spans.items() if key != name]
        assert not any(_overlap(span, other) for other in others), (name, spans)
