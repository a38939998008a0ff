"""A clean clone is the whole project: nothing in it names a path outside it, and `make test`
installs (or names) the system packages its tests need before any test runs."""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SYSTEM_PACKAGES = REPO / "scripts" / "system-packages"

# Absolute folders of a particular machine or workplace; a project file never needs them.
MACHINE_PATH = re.compile(r"(?:^|[^\w.~-])/(?:work|check|root|home|opt|mnt)/")
CLIMB = re.compile(r"(?:\.\./)+[\w.-]*")
PARENTS = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?\.parents\[(\d+)\]")


def tracked_text_files() -> list[Path]:
    """Every file git tracks, minus binaries (figures, GGUF-free fixtures are text)."""
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    files = []
    for name in filter(None, names):
        path = REPO / name.decode()
        data = path.read_bytes() if path.is_file() else b""
        if b"\0" not in data[:8192]:
            files.append(path)
    return files


def outside_references(path: Path, text: str) -> list[str]:
    """The places in `text` (the content of `path`) that name a path outside the repository."""
    found = [m.group(0).strip() for m in MACHINE_PATH.finditer(text)]
    folder = path.parent
    for match in CLIMB.finditer(text):
        target = (folder / match.group(0)).resolve()
        if not target.is_relative_to(REPO):
            found.append(match.group(0))
    if path.suffix == ".py":
        depth = len(path.relative_to(REPO).parts) - 1  # parents[depth] is the repository
        found += [m.group(0) for m in PARENTS.finditer(text) if int(m.group(1)) > depth]
    return found


def test_no_project_file_names_a_path_outside_the_repository() -> None:
    problems = {}
    for path in tracked_text_files():
        if path == Path(__file__).resolve():
            continue  # this file's own examples of what the check must find
        text = path.read_text(errors="replace")
        hits = outside_references(path, text)
        if hits:
            problems[str(path.relative_to(REPO))] = hits[:3]
    assert problems == {}


@pytest.mark.parametrize(
    ("relative", "text"),
    [
        ("tests/conftest.py", 'REFERENCE = Path(__file__).resolve().parents[2] / "elsewhere"'),
        ("Makefile", "cp ../elsewhere/table.json examples/"),
        ("docs/x.md", "see [the table](../../elsewhere/table.md)"),
        ("README.md", "the files are in /home/alice/reference"),
    ],
)
def test_the_check_finds_each_kind_of_outside_path(relative: str, text: str) -> None:
    assert outside_references(REPO / relative, text) != []


@pytest.mark.parametrize(
    ("relative", "text"),
    [
        ("tests/conftest.py", 'DIR = Path(__file__).resolve().parents[1] / "examples"'),
        ("docs/x.md", "see [the README](../README.md)"),
        ("tests/test_x.py", 'call("run_experiment", {"plan_file": "../outside.toml"})'),
    ],
)
def test_the_check_passes_paths_inside_the_repository(relative: str, text: str) -> None:
    assert outside_references(REPO / relative, text) == []


def fake_system(tmp_path: Path, *, chromium: bool, faketime: bool) -> dict[str, str]:
    """A root folder holding (or not) the two packages' files, and a PATH without apt-get."""
    root = tmp_path / "root"
    if chromium:
        browser = root / "usr" / "bin" / "chromium"
        browser.parent.mkdir(parents=True)
        browser.write_text("#!/bin/sh\n")
        browser.chmod(0o755)
    if faketime:
        library = root / "usr" / "lib" / "x86_64-linux-gnu" / "faketime" / "libfaketime.so.1"
        library.parent.mkdir(parents=True)
        library.write_bytes(b"")
    root.mkdir(exist_ok=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "id").symlink_to("/usr/bin/id")
    return {"PATH": str(bin_dir), "SYSTEM_ROOT": str(root)}


@pytest.mark.parametrize(
    ("chromium", "faketime", "named"),
    [
        (False, False, "chromium libfaketime"),
        (True, False, "libfaketime"),
        (False, True, "chromium"),
    ],
)
def test_missing_packages_stop_with_one_line_naming_the_command(
    tmp_path: Path, chromium: bool, faketime: bool, named: str
) -> None:
    env = fake_system(tmp_path, chromium=chromium, faketime=faketime)
    done = subprocess.run(
        ["/bin/bash", str(SYSTEM_PACKAGES)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1
    assert f"`apt-get install -y {named}`" in lines[0]


def test_present_packages_pass_silently(tmp_path: Path) -> None:
    env = fake_system(tmp_path, chromium=True, faketime=True)
    done = subprocess.run(
        ["/bin/bash", str(SYSTEM_PACKAGES)], env=env, capture_output=True, text=True
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_make_test_checks_system_packages_before_the_tests() -> None:
    """The recipe order is the promise: packages first, pytest after."""
    dry = subprocess.run(
        ["make", "-n", "test"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert "scripts/system-packages" in dry
    assert dry.index("scripts/system-packages") < dry.index("pytest")


PREPARE_TOOLS = ("ruff", "lint-imports", "mypy")


def stand_in_venv(venv: Path, ran: Path) -> None:
    """A .venv whose installs are done (stamps newer than pyproject.toml) and whose tools only
    record that they ran: `make test`'s own steps and order, without their minutes."""
    bin_dir = venv / "bin"
    bin_dir.mkdir(parents=True)
    for tool in ("python", *PREPARE_TOOLS, "sagemeter", "pytest"):
        script = bin_dir / tool
        script.write_text(f"#!/bin/sh\necho {tool} >> '{ran}'\n")
        script.chmod(0o755)
    for stamp in ("package", "demo", "test"):
        (venv / f".installed-{stamp}").touch()


def make(tmp_path: Path, target: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    maker = shutil.which("make")
    assert maker is not None
    return subprocess.run(
        [maker, "--no-print-directory", target, f"VENV={tmp_path / 'venv'}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_missing_package_stops_make_test_with_its_line_before_any_test(tmp_path: Path) -> None:
    """The steps before the tests run side by side; the one that cannot install a package still
    stops `make test` before pytest, with its one line."""
    env = fake_system(tmp_path, chromium=False, faketime=True)
    bash = shutil.which("bash")
    assert bash is not None
    (tmp_path / "bin" / "bash").symlink_to(bash)
    ran = tmp_path / "ran.txt"
    stand_in_venv(tmp_path / "venv", ran)
    done = make(tmp_path, "test", env)
    assert done.returncode != 0
    assert "`apt-get install -y chromium`" in done.stderr
    assert "pytest" not in (ran.read_text().split() if ran.exists() else [])


def test_prepare_tests_runs_every_step(tmp_path: Path) -> None:
    env = fake_system(tmp_path, chromium=True, faketime=True)
    env["PATH"] = f"{env['PATH']}:/usr/bin:/bin"
    ran = tmp_path / "ran.txt"
    stand_in_venv(tmp_path / "venv", ran)
    done = make(tmp_path, "prepare-tests", env)
    assert done.returncode == 0, done.stderr
    expected = {*PREPARE_TOOLS}
    if platform.system() == "Linux" and platform.machine() == "x86_64":
        expected.add("sagemeter")  # `engines install vllm`
    assert set(ran.read_text().split()) == expected
