"""The layers hold: the import-linter contract in pyproject.toml passes and can fail, and imports of
sagemeter's own modules stay at the top of their modules (outside the faces, cli/ and mcp/).

A lazy own-module import hides a cycle the layers would otherwise show; lazy imports of heavy
third-party packages (boto3, numpy, ray, matplotlib) are a start-up choice and are not counted.
"""

from __future__ import annotations

import ast
import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
PACKAGE = ROOT / "src" / "sagemeter"
FACES = ("cli", "mcp")
MAX_LAZY_OWN_IMPORTS = 10


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _own(node: ast.stmt) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "sagemeter"
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] == "sagemeter" for alias in node.names)
    return False


def lazy_own_imports(source: str) -> list[int]:
    """Line numbers of imports of sagemeter's own modules inside function bodies, leaving out
    those under `if TYPE_CHECKING:` (never run)."""
    found: list[int] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for other in child.orelse:
                    visit_one(other, in_function)
                continue
            visit_one(child, in_function)

    def visit_one(child: ast.AST, in_function: bool) -> None:
        if in_function and isinstance(child, ast.stmt) and _own(child):
            found.append(child.lineno)
        inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
        visit(child, inner)

    visit(ast.parse(source), False)
    return found


@functools.cache
def counted_modules() -> dict[str, list[int]]:
    """Each module outside the faces with its lazy own-module imports."""
    found: dict[str, list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.split("/")[0] in FACES:
            continue
        lines = lazy_own_imports(path.read_text(encoding="utf-8"))
        if lines:
            found[relative] = lines
    return found


def _listing(found: dict[str, list[int]]) -> str:
    return "; ".join(f"{name}:{','.join(map(str, lines))}" for name, lines in found.items())


def test_the_walk_counts_own_lazy_imports_only() -> None:
    source = """
from __future__ import annotations
from typing import TYPE_CHECKING
from sagemeter.errors import UserError          # top: not counted
if TYPE_CHECKING:
    from sagemeter.targets import Target        # never run: not counted

def load():
    import boto3                                # heavy third party: not counted
    from sagemeter.results import load_result   # counted
    if TYPE_CHECKING:
        from sagemeter.paths import state_dir   # not counted
    else:
        from . import sibling                   # counted (relative)

class Box:
    async def open(self):
        import sagemeter.transport.client       # counted
        def inner():
            from sagemeter import sagemaker as sm  # counted
"""
    assert lazy_own_imports(source) == [10, 14, 18, 20]


def test_at_most_ten_lazy_own_imports_outside_the_faces() -> None:
    found = counted_modules()
    assert sum(map(len, found.values())) <= MAX_LAZY_OWN_IMPORTS, _listing(found)


# report sits above experiment (a report reads a run's journal; a run's report step calls the
# writer the face hands it): whichever of their modules a face imports first must still load.
# Only these two packages are loaded afresh before each (their modules, and their names on the
# `sagemeter` package): the layers contract keeps every lower module from importing them, so no
# import cycle through them leaves the two, and cycles are found as with the whole package
# loaded afresh, at a fifth of its CPU.
FRESH_PACKAGES = ("sagemeter.experiment", "sagemeter.report")
FIRST_IMPORTS = sorted(
    ".".join(("sagemeter", *path.relative_to(PACKAGE).with_suffix("").parts))
    for folder in ("experiment", "report")
    for path in (PACKAGE / folder).glob("*.py")
    if path.name != "__init__.py"
)


def test_each_experiment_and_report_module_loads_when_imported_first() -> None:
    script = """
import importlib, sys
fresh = tuple(sys.argv[1].split(","))
below = tuple(f + "." for f in fresh)
failed = []
for name in sys.argv[2:]:
    for loaded in [m for m in sys.modules if m in fresh or m.startswith(below)]:
        del sys.modules[loaded]
    for package in fresh:
        parent, _, child = package.rpartition(".")
        if parent in sys.modules:
            sys.modules[parent].__dict__.pop(child, None)
    try:
        importlib.import_module(name)
    except ImportError as exc:
        failed.append(f"{name}: {exc}")
print("\\n".join(failed))
"""
    env = {**os.environ, "PYTHONPATH": str(PACKAGE.parent)}
    done = subprocess.run(
        [sys.executable, "-c", script, ",".join(FRESH_PACKAGES), *FIRST_IMPORTS],
        capture_output=True, text=True, env=env, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", done.stdout


def _lint_imports() -> str:
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    found = shutil.which("lint-imports", path=path)
    if found is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    return found


def _run_contract(root: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports with the pyproject.toml in `root`, reading the package under root/src."""
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    return subprocess.run(
        [_lint_imports(), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_layers_contract_holds() -> None:
    run = _run_contract(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 kept, 0 broken" in run.stdout


def test_the_layers_contract_fails_on_an_upward_import_or_a_module_in_no_layer(
    tmp_path: Path,
) -> None:
    shutil.copytree(PACKAGE, tmp_path / "src" / "sagemeter", ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    errors = tmp_path / "src" / "sagemeter" / "errors.py"
    errors.write_text(errors.read_text() + "\nimport sagemeter.cli  # a leaf reaching a face\n")
    (tmp_path / "src" / "sagemeter" / "stray.py").write_text('"""In no layer."""\n')
    run = _run_contract(tmp_path)
    assert run.returncode != 0
    assert "sagemeter.errors is not allowed to import sagemeter.cli" in run.stdout
    assert "sagemeter.stray" in run.stdout  # exhaustive: every top-level module has a layer
