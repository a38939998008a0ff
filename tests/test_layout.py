"""The tests are laid out like the package, so a test is found where its module is.

A test file sits in tests/<package>/ when it tests src/sagemeter/<package>/ (a subpackage's tests
in its top package's folder), or at tests/ root when it tests a loose top-level module
(src/sagemeter/errors.py, redaction.py ...) or the repository as a whole. Every folder is a
package (`__init__.py`), so pytest names each module by its full path (`tests.engines.test_x`)
and `from tests.wire import ...` works from any depth; no two test files share a name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "src" / "sagemeter"

# Root test files whose names start with no loose module: the loose module each tests
# (None: the repository as a whole).
ROOT: dict[str, str | None] = {
    "test_bad_input.py": "errors",
    "test_benchmark_pages.py": None,
    "test_bounded_reads.py": "textfiles",
    "test_clean_clone.py": None,
    "test_failed_exit.py": "errors",
    "test_harness_signals.py": None,
    "test_layers.py": None,
    "test_layout.py": None,
    "test_leak_faces.py": "redaction",
    "test_leaks.py": "redaction",
    "test_lifecycle.py": "parentwatch",
    "test_long_modules.py": None,
    "test_method_settings.py": "settings",
    "test_no_traceback.py": "errors",
    "test_outputs.py": "atomic",
    "test_reruns.py": None,
    "test_quiet_turns.py": None,
    "test_secret_split.py": "redaction",
    "test_terminal_escapes.py": "printable",
    "test_test_tier.py": None,
    "test_tracebacks.py": "errors",
    "test_value_bounds.py": "limits",
    "test_values.py": "limits",
}


def misplaced(tests: Path, package: Path, root: dict[str, str | None]) -> list[str]:
    """Each test file in a folder that mirrors no package, and each stale ROOT entry."""
    loose = sorted(p.stem for p in package.glob("*.py") if not p.stem.startswith("__"))
    problems = []
    seen: dict[str, Path] = {}
    for path in sorted(tests.rglob("test_*.py")):
        relative = path.relative_to(tests)
        folder = relative.parent
        if folder.parts[:1] == ("data",):
            continue
        if path.name in seen:
            problems.append(f"tests/{relative}: the name of tests/{seen[path.name]} too")
        seen.setdefault(path.name, relative)
        if not folder.parts:
            stem = path.stem.removeprefix("test_")
            if path.name not in root and not any(
                stem == m or stem.startswith(f"{m}_") for m in loose
            ):
                problems.append(
                    f"tests/{relative}: at tests/ root, which holds the loose modules' tests; "
                    "move it to tests/<package>/ of the package it tests"
                )
            continue
        if not (package.joinpath(*folder.parts) / "__init__.py").is_file():
            problems.append(f"tests/{relative}: src/sagemeter/{folder.as_posix()}/ is no package")
        for depth in range(1, len(folder.parts) + 1):
            init = tests.joinpath(*folder.parts[:depth]) / "__init__.py"
            if not init.is_file():
                problems.append(
                    f"tests/{relative}: tests/{init.parent.relative_to(tests)}/ has no __init__.py"
                )
    for name, module in root.items():
        if module is not None and not (package / f"{module}.py").is_file():
            problems.append(f"ROOT[{name!r}]: src/sagemeter/{module}.py is gone")
    return problems


def test_every_test_file_sits_where_its_package_is() -> None:
    assert misplaced(TESTS, PACKAGE, ROOT) == []


def make_tree(tmp_path: Path, files: list[str]) -> tuple[Path, Path]:
    """A small src/sagemeter and tests/ with the given files (paths under tmp_path)."""
    for name in [
        "src/sagemeter/__init__.py",
        "src/sagemeter/errors.py",
        "src/sagemeter/engines/__init__.py",
        "src/sagemeter/measure/__init__.py",
        "src/sagemeter/measure/server_metrics/__init__.py",
        "tests/__init__.py",
        *files,
    ]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    return tmp_path / "tests", tmp_path / "src" / "sagemeter"


def test_a_mirrored_tree_passes(tmp_path: Path) -> None:
    tests, package = make_tree(
        tmp_path,
        [
            "tests/engines/__init__.py",
            "tests/engines/test_engines.py",
            "tests/measure/__init__.py",
            "tests/measure/server_metrics/__init__.py",
            "tests/measure/server_metrics/test_scrape.py",
            "tests/test_errors.py",
            "tests/test_errors_exit_codes.py",
            "tests/test_clean_clone.py",
            "tests/data/test_fixture.py",
        ],
    )
    assert misplaced(tests, package, {"test_clean_clone.py": None}) == []


@pytest.mark.parametrize(
    ("files", "root", "found"),
    [
        pytest.param(
            ["tests/platforms/__init__.py", "tests/platforms/test_x.py"],
            {},
            "platforms/ is no package",
            id="a-folder-no-package-has",
        ),
        pytest.param(
            ["tests/engines/test_x.py"], {}, "tests/engines/ has no __init__.py", id="no-init"
        ),
        pytest.param(
            ["tests/test_engines_x.py"], {}, "at tests/ root", id="a-package-test-at-root"
        ),
        pytest.param(["tests/test_errorsome.py"], {}, "at tests/ root", id="a-loose-name-prefix"),
        pytest.param(
            [
                "tests/engines/__init__.py",
                "tests/engines/test_x.py",
                "tests/measure/__init__.py",
                "tests/measure/test_x.py",
            ],
            {},
            "the name of tests/engines/test_x.py too",
            id="one-name-twice",
        ),
        pytest.param(
            [], {"test_gone.py": "limits"}, "src/sagemeter/limits.py is gone", id="stale-root-entry"
        ),
    ],
)
def test_each_kind_of_misplaced_file_is_found(
    tmp_path: Path, files: list[str], root: dict[str, str | None], found: str
) -> None:
    tests, package = make_tree(tmp_path, files)
    problems = misplaced(tests, package, root)
    assert len(problems) == 1 and found in problems[0], problems
