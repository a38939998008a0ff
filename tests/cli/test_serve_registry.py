"""`sagemeter serve` reaches every engine, the built-ins too, through the engine registry: its
code names no target class and no engine, so a plug-in engine is served as `local:` is."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from sagemeter import targets
from sagemeter.cli import engine as serve_command
from sagemeter.cli import engines as serve_path
from sagemeter.engine_registry import engines

TARGET_CLASSES = frozenset(
    name for name, value in vars(targets).items() if inspect.isclass(value) and "Target" in name
)


def _names_a_target_class_or_engine(tree: ast.AST) -> list[str]:
    """Each isinstance/issubclass on a target class, each use of a built-in engine's target
    class (`LocalTarget(...)`, its import) and each string that is exactly an engine's name
    (`target.engine == "local"`). `EngineTarget` as a type (the registry's) is no branch."""
    built_in = TARGET_CLASSES - {"EngineTarget", "OpenAITarget", "SageMakerTarget"}
    found = []
    for node in ast.walk(tree):
        checks = (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
            and any(_spelled(each) in TARGET_CLASSES for each in ast.walk(node.args[1]))
        )
        named = (
            checks
            or _spelled(node) in built_in
            or (isinstance(node, ast.alias) and node.name in built_in)
            or (isinstance(node, ast.Constant) and node.value in engines())
        )
        if named:
            found.append(f"line {getattr(node, 'lineno', '?')}: {ast.unparse(node)}")
    return found


def _spelled(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _serve_code() -> list[ast.AST]:
    """`cli/engine.py` whole, and the serve functions of `cli/engines.py`."""
    whole = ast.parse(Path(serve_command.__file__).read_text())
    functions = [serve_path.serve_target, serve_path._engine_target]
    return [whole, *(ast.parse(inspect.getsource(function)) for function in functions)]


def test_serve_names_no_target_class_and_no_engine() -> None:
    assert {"LocalTarget", "VllmTarget", "CommandTarget", "EngineTarget"} <= TARGET_CLASSES
    offenders = [hit for tree in _serve_code() for hit in _names_a_target_class_or_engine(tree)]
    assert offenders == []


def test_the_walk_sees_a_branch_on_a_target_class_or_an_engine_name() -> None:
    for text in (
        "if isinstance(parsed, VllmTarget):\n    pass\n",
        "if isinstance(parsed, targets.EngineTarget) and parsed:\n    pass\n",
        "from sagemeter.targets import LocalTarget\n",
        'if target.engine == "local":\n    pass\n',
    ):
        assert _names_a_target_class_or_engine(ast.parse(text)), text
