"""`scripts/test-tier`, the runner `make test` and `make check` call for each tier: its two parts
(the tests on workers, then the `alone` tests one at a time), the line each part prints, and its
exit code, the worse of the two parts'; a tier whose marker selects no test is an error; without
pytest arguments the second part collects only the files that hold `alone` tests.

Each case runs the script on a small inner tree of tests, as `make` runs it: on one worker, and
on two where the part that fills cold bytecode caches first is checked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# Slow: each case runs inner pytest sessions (about 15 s and 10 CPU-s for the module on a 2-core
# host); they check the runner of both tiers, which `make test` runs.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "test-tier"
PYTEST = str(Path(sys.executable).parent / "pytest")
INI = """[pytest]
markers =
    slow: slow
    alone: alone
"""
PART_LINE = re.compile(
    r"^(?P<marker>.+) tier, (?P<part>bytecode caches|workers|alone): "
    r"(?P<wall>\d+) s wall, (?P<cpu>\d+) s CPU on (?P<cores>\d+) cores"
    r"(, the machine's CPUs (?P<busy>\d+)% busy)?$"
)


def _tier(
    tree: Path,
    marker: str,
    tests: str,
    workers: int = 1,
    pytest_args: list[str] | None = None,
    ini: str = INI,
    beside: bool = True,
) -> tuple[int, list[re.Match[str]], str]:
    """The script run on `tree` as `make` runs it, with these pytest arguments (by default the
    tree's tests folder, quietly and without a cache; `[]` gives none); `beside=False` asks for
    the alone part after the workers part even where it could run beside it."""
    (tree / "pytest.ini").write_text(ini)
    (tree / "tests").mkdir(exist_ok=True)
    (tree / "tests" / "test_inner.py").write_text("import pytest\n\n" + tests)
    env = {**os.environ}
    env.pop("SAGEMETER_TEST_BESIDE", None)  # the outer run's choice is not the case's
    if not beside:
        env["SAGEMETER_TEST_BESIDE"] = "0"
    if workers == 1:  # one worker needs no plug-in: the inner runs start a third faster
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    if pytest_args is None:
        pytest_args = ["-p", "no:cacheprovider", "-q", "tests"]
    done = subprocess.run(
        ["bash", str(SCRIPT), PYTEST, marker, str(workers), "load", "0", *pytest_args],
        cwd=tree,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    lines = [m for line in done.stdout.splitlines() if (m := PART_LINE.match(line))]
    return done.returncode, lines, done.stdout + done.stderr


PASSING = """
def test_plain():
    pass


@pytest.mark.alone
def test_timed():
    pass


@pytest.mark.slow
def test_slow():
    raise AssertionError("the slow tier is not asked for")
"""


def test_each_part_prints_its_wall_time_cpu_and_the_machines_busy_share(tmp_path: Path) -> None:
    code, lines, output = _tier(tmp_path, "not slow", PASSING)
    assert code == 0, output
    assert [(m["marker"], m["part"]) for m in lines] == [
        ("not slow", "workers"),
        ("not slow", "alone"),
    ], output
    assert "2 passed" not in output and output.count("1 passed") == 2, output
    for line in lines:
        assert int(line["cores"]) >= 1
        if Path("/proc/stat").is_file():  # Linux: the machine's share is read, 0 to 100
            assert line["busy"] is not None and 0 <= int(line["busy"]) <= 100, line[0]
        else:
            assert line["busy"] is None, line[0]


@pytest.mark.parametrize(
    ("failing", "expected"),
    [("test_plain", "the workers part"), ("test_timed", "the alone part")],
    ids=["workers", "alone"],
)
def test_a_failure_in_either_part_fails_the_tier_and_both_parts_run(
    tmp_path: Path, failing: str, expected: str
) -> None:
    tests = PASSING.replace(f"def {failing}():\n    pass", f"def {failing}():\n    assert 2 == 3")
    assert tests != PASSING, expected
    code, lines, output = _tier(tmp_path, "not slow", tests)
    assert code == 1, output
    assert [m["part"] for m in lines] == ["workers", "alone"], output
    assert output.count("1 failed") == 1 and output.count("1 passed") == 1, output


def test_one_empty_part_is_fine_and_a_tier_selecting_nothing_is_an_error(tmp_path: Path) -> None:
    code, lines, output = _tier(tmp_path, "slow", PASSING.replace("raise AssertionError", "str"))
    assert code == 0, output  # the slow test on the workers, no slow `alone` test
    assert [m["part"] for m in lines] == ["workers", "alone"], output
    code, _, output = _tier(tmp_path, "slow and alone", PASSING)
    assert code == 5 and "no test selected by: slow and alone" in output, output


def test_lf_finds_the_alone_parts_last_failures(tmp_path: Path) -> None:
    """The alone part keeps pytest's cache in a folder of its own: beside the workers part, the
    pytest that ended last would otherwise write back the cache it read at its start, without
    the other's failures (the workers part ends last here)."""
    tests = PASSING.replace(
        "def test_plain():\n    pass", "def test_plain():\n    __import__('time').sleep(3)"
    ).replace("def test_timed():\n    pass", "def test_timed():\n    assert 2 == 3")
    code, _, output = _tier(tmp_path, "not slow", tests, pytest_args=["-q", "tests"])
    assert code == 1 and output.count("1 failed") == 1, output
    rerun = ["-q", "--lf", "--lfnf=none", "tests"]  # nothing known to have failed: run nothing
    code, lines, output = _tier(tmp_path, "not slow", tests, pytest_args=rerun)
    assert code == 1, output
    assert [m["part"] for m in lines] == ["workers", "alone"], output
    assert output.count("1 failed") == 1 and "FAILED tests/test_inner.py::test_timed" in output
    assert "passed" not in output, output  # test_plain passed last time: not run again


def test_workers_find_the_bytecode_caches_made_once_when_they_were_cold(tmp_path: Path) -> None:
    """With workers, a cold tests folder's caches are made before they start (a line says so);
    warm, nothing is made again."""
    imports = tmp_path / "imports.log"
    # The inner module notes each process that imports it: a collection only, or a test run.
    tests = (
        f"""import sys
with open({str(imports)!r}, "a") as log:
    log.write(("collect" if "--collect-only" in sys.argv else "run") + "\\n")
"""
        + PASSING
    )
    code, lines, output = _tier(tmp_path, "not slow", tests, workers=2)
    assert code == 0, output
    assert [m["part"] for m in lines] == ["bytecode caches", "workers", "alone"], output
    assert list((tmp_path / "tests" / "__pycache__").glob("test_inner.*-pytest-*.pyc")), output
    assert imports.read_text().split().count("collect") == 1, imports.read_text()
    imports.unlink()
    code, lines, output = _tier(tmp_path, "not slow", tests, workers=2)
    assert code == 0, output
    assert [m["part"] for m in lines] == ["workers", "alone"], output
    assert "collect" not in imports.read_text().split(), imports.read_text()


def test_without_arguments_the_alone_part_collects_only_the_files_holding_alone_tests(
    tmp_path: Path,
) -> None:
    """The workers part notes the files of the `alone` tests it deselects (tests/alone_files.py,
    the tree's conftest here); given no pytest arguments the alone part run after it collects
    those only. Given any, it collects as they say: never a file of theirs widened to its
    `alone` tests."""
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "alone_files.py").read_text())
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_other.py").write_text("def test_a():\n    pass\n")
    ini = INI + "testpaths = tests\naddopts = -q -p no:cacheprovider\n"
    code, lines, output = _tier(
        tmp_path, "not slow", PASSING, pytest_args=[], ini=ini, beside=False
    )
    assert code == 0, output
    assert [m["part"] for m in lines] == ["workers", "alone"], output
    assert "1 passed, 2 deselected" in output, output  # test_inner.py's three tests only
    code, lines, output = _tier(tmp_path, "not slow", PASSING, pytest_args=["tests"], ini=ini)
    assert code == 0, output
    assert "1 passed, 3 deselected" in output, output  # test_other.py collected too
    two_alone = PASSING + "\n\n@pytest.mark.alone\ndef test_timed_too():\n    pass\n"
    named = ["tests/test_inner.py::test_timed"]
    code, lines, output = _tier(tmp_path, "not slow", two_alone, pytest_args=named, ini=ini)
    assert code == 0, output  # nothing for the workers, the one `alone` test asked for alone
    assert output.count(" passed") == 1 and "1 passed in" in output, output


def _idle_groups_can_be_made() -> bool:
    """What the script needs to run the alone part beside the workers part: Linux's cgroup v1
    `cpu` controller with `cpu.idle`, writable here (root)."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
        own = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return False
    mount = next(
        (f[1] for f in map(str.split, mounts) if f[2] == "cgroup" and "cpu" in f[3].split(",")),
        None,
    )
    path = next(
        (f[2] for f in (line.split(":", 2) for line in own) if "cpu" in f[1].split(",")), None
    )
    if mount is None or path is None:
        return False
    folder = Path(mount + path.rstrip("/"))
    return (folder / "cpu.idle").exists() and os.access(folder, os.W_OK)


BESIDE_TESTS = """
import os, time
from pathlib import Path

HERE = Path(__file__).parent


def note(name):
    try:
        lines = open("/proc/self/cgroup").read().splitlines()
    except OSError:  # not Linux
        lines = []
    fields = [line.split(":", 2) for line in lines]
    cgroup = next((f[2] for f in fields if "cpu" in f[1].split(",")), "-")
    (HERE / f"{name}.txt").write_text(f"{cgroup}\\n{os.environ.get('SAGEMETER_TEST_TURNS')}\\n")


def wait_for(name):
    (HERE / f"{name}.started").touch()
    other = "timed" if name == "plain" else "plain"
    deadline = time.monotonic() + 60
    while not (HERE / f"{other}.started").exists():
        assert time.monotonic() < deadline, f"{other} never ran beside {name}"
        time.sleep(0.05)


def test_plain():
    note("plain")
    wait_for("plain")


@pytest.mark.alone
def test_timed():
    note("timed")
    wait_for("timed")
"""


# `alone`: in the outer run's alone part, outside its workers' idle group, so the inner workers'
# group is a sibling of theirs; made inside it, the inner workers would get a core only when
# the outer tier's other worker left one, and could wait out their minute for it.
@pytest.mark.alone
@pytest.mark.skipif(
    not _idle_groups_can_be_made(),
    reason="needs root on Linux's cgroup v1 cpu controller (README, Tests: beside)",
)
def test_where_it_can_the_alone_part_runs_beside_the_workers_in_their_idle_cpu_group(
    tmp_path: Path,
) -> None:
    """Each inner test waits until the other has started, so the tier passes only when its two
    parts ran side by side; the workers' test runs in the script's idle CPU group, the alone
    test outside it, both given one turns folder, and the group is gone at the end."""
    code, lines, output = _tier(tmp_path, "not slow", BESIDE_TESTS)
    assert code == 0, output
    assert [m["part"] for m in lines] == ["workers", "alone"], output
    said = re.search(
        r"the alone part runs beside the workers part, whose CPU group is idle \((\S+)\)", output
    )
    assert said is not None, output
    group = Path(said.group(1))
    assert group.name.startswith("sagemeter-tests-") and not group.exists(), output
    plain_group, plain_turns = (tmp_path / "tests" / "plain.txt").read_text().split()
    timed_group, timed_turns = (tmp_path / "tests" / "timed.txt").read_text().split()
    assert plain_group.endswith(f"/{group.name}") and group.name not in timed_group
    assert plain_turns == timed_turns != "None"


@pytest.mark.parametrize(
    ("beside", "pytest_args"),
    [(False, []), (True, ["-s"]), (True, ["--capture=no"])],
    ids=["SAGEMETER_TEST_BESIDE=0", "-s", "--capture=no"],
)
def test_asked_not_to_the_alone_part_runs_after_the_workers_part(
    tmp_path: Path, beside: bool, pytest_args: list[str]
) -> None:
    """SAGEMETER_TEST_BESIDE=0, a pytest argument that wants the terminal (the alone part's
    output would go to a file), and wherever no idle CPU group can be made: one part after the
    other, so the tests that wait for each other fail, and no group is made."""
    args = ["-p", "no:cacheprovider", "-q", *pytest_args, "tests"]
    tests = BESIDE_TESTS.replace("60", "1")
    code, lines, output = _tier(tmp_path, "not slow", tests, pytest_args=args, beside=beside)
    assert code == 1, output
    assert [m["part"] for m in lines] == ["workers", "alone"], output
    assert "timed never ran beside plain" in output and "runs beside" not in output, output
    assert output.count("1 failed") == 1, output  # the second part found the first's file
    own = (tmp_path / "tests" / "timed.txt").read_text().split()[0]
    assert (tmp_path / "tests" / "plain.txt").read_text().split()[0] == own
