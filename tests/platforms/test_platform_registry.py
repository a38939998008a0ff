"""Platforms are plug-ins: the registry loads `sagemeter.platforms` entry points, refuses an
object that does not keep the protocol, and the run's own modules reach SageMaker only
through it (no import of `sagemeter.sagemaker` in experiment/, compare/ or report/)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest

from sagemeter.engine_registry import engines
from sagemeter.errors import UserError
from sagemeter.experiment import parse_plan
from sagemeter.platforms import registry
from sagemeter.platforms.deployment import Deployment
from sagemeter.platforms.registry import (
    KnowsEndpoints,
    KnowsQuota,
    NamesEndpoints,
    Platform,
    endpoint_facts,
    platform_named,
    platform_of,
    platforms,
    quota_lines,
)
from sagemeter.plugins import load_one
from sagemeter.redaction import MASK, register_secret
from sagemeter.sagemaker.plan_table import SageMakerArm
from sagemeter.sagemaker.platform import Checked, QuotaLine
from sagemeter.sagemaker.quota import QuotaRow
from sagemeter.sagemaker.spec import DeploySpec
from sagemeter.targets import OpenAITarget, SageMakerTarget, parse_target

PACKAGE = Path(registry.__file__).resolve().parents[1]
PLATFORM_FREE = ("experiment", "compare", "report")


def _imports_sagemaker(path: Path) -> list[str]:
    """Each `import sagemeter.sagemaker…` / `from sagemeter.sagemaker… import` /
    `from sagemeter import sagemaker` in a module, at any depth (inside functions too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            module = node.module or ""
            names = [module] + [f"{module}.{alias.name}" for alias in node.names]
        if any(n == "sagemeter.sagemaker" or n.startswith("sagemeter.sagemaker.") for n in names):
            found.append(f"{path}:{node.lineno}")
    return found


def test_the_run_compare_and_report_import_no_platform() -> None:
    modules = [path for folder in PLATFORM_FREE for path in (PACKAGE / folder).rglob("*.py")]
    assert len(modules) > 20  # the walk found the packages
    offenders = [hit for path in modules for hit in _imports_sagemaker(path)]
    assert offenders == []


# What naming a platform or an engine in code looks like: its target class, or its name compared
# as a literal (`backend == "sagemaker"`, `backend in ("local", "vllm", "cmd")`).
_NAMED_CLASSES = frozenset({"SageMakerTarget", "EngineTarget", "CommandTarget"})


def _names_a_platform_or_engine(path: Path) -> list[str]:
    """Each use of a platform's or engine's target class, and each string literal that is exactly
    a platform's or an engine's name (messages that mention one are prose, not a branch)."""
    names = {"sagemaker", *engines()}
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        named = (
            (isinstance(node, ast.Name) and node.id in _NAMED_CLASSES)
            or (isinstance(node, ast.Attribute) and node.attr in _NAMED_CLASSES)
            or (isinstance(node, ast.Constant) and node.value in names)
        )
        if named:
            found.append(f"{path}:{getattr(node, 'lineno', '?')}")
    return found


def test_the_run_compare_and_report_name_no_platform_or_engine() -> None:
    """They ask the registries (`started_here`, `platform_named`, `endpoint_facts`) instead of
    branching on a name, so a plug-in engine or platform is treated as a built-in one is."""
    modules = [path for folder in PLATFORM_FREE for path in (PACKAGE / folder).rglob("*.py")]
    offenders = [hit for path in modules for hit in _names_a_platform_or_engine(path)]
    assert offenders == []


def test_the_name_walk_sees_a_branch_on_a_name(tmp_path: Path) -> None:
    forms = [
        'def f(b):\n    return b == "sagemaker"\n',
        'def f(b):\n    return b in ("local", "cmd")\n',
        "def f(t):\n    return isinstance(t, SageMakerTarget)\n",
    ]
    for index, text in enumerate(forms):
        probe = tmp_path / f"named_{index}.py"
        probe.write_text(text)
        assert _names_a_platform_or_engine(probe), text


def test_the_ast_walk_sees_each_form_of_import(tmp_path: Path) -> None:
    """The check above would catch each spelling, inside a function too."""
    forms = [
        "import sagemeter.sagemaker.aws\n",
        "from sagemeter import sagemaker as sm\n",
        "def f():\n    from sagemeter.sagemaker.pricing import try_hourly_price\n",
    ]
    for index, text in enumerate(forms):
        probe = tmp_path / f"probe_{index}.py"
        probe.write_text(text)
        assert len(_imports_sagemaker(probe)) == 1, text
    clean = tmp_path / "clean.py"
    clean.write_text("from sagemeter.platforms.registry import platform_of\n")
    assert _imports_sagemaker(clean) == []


def test_sagemaker_is_a_registered_platform_and_its_table_is_its_own() -> None:
    sagemaker = platform_named("sagemaker")
    assert isinstance(sagemaker, Platform) and "sagemaker" in platforms()
    plan = parse_plan(
        'name = "p"\n[[arm]]\nname = "a"\ntarget = "http://127.0.0.1:9"\n'
        '[[arm]]\nname = "b"\n[arm.sagemaker]\nmodel = "org/m"\ncount = 2\n'
    )
    arm = plan.arms[1]
    assert (arm.platform, arm.deployed) == ("sagemaker", True)
    assert isinstance(arm.table, SageMakerArm) and arm.table.count == 2
    # The plan reads back from the journal's copy with its table as written.
    assert plan.to_data()["arm"][1]["sagemaker"] == {"model": "org/m", "count": 2}
    assert platform_named("nowhere") is None
    with pytest.raises(UserError, match="no platform 'nowhere' is installed"):
        platform_of("nowhere")


class _NotAPlatform:
    name = "odd"


def _load(name: str, load: Callable[[], object]) -> object:
    return load_one(name, load, "platform", registry._keeps_protocol)


def test_an_object_that_does_not_keep_the_protocol_is_refused_in_one_line() -> None:
    refused = _load("odd", _NotAPlatform)
    assert refused == (
        "the platform plug-in 'odd' (_NotAPlatform) is not a sagemeter platform whose name is "
        "'odd'; see docs/extending.md"
    )
    misnamed = _load("other", lambda: platform_of("sagemaker"))
    assert isinstance(misnamed, str) and "whose name is 'other'" in misnamed

    def broken() -> object:
        raise ImportError("no module named thing")

    assert _load("gone", broken) == (
        "the platform plug-in 'gone' could not be loaded: ImportError: no module named thing"
    )


def test_a_deployment_written_before_platforms_reads_as_sagemakers() -> None:
    old = {
        "result": "a",
        "arm": "a",
        "endpoint": "e",
        "regions": ["us-east-2", "us-east-1"],
        "region": "us-east-1",
        "instance_types": ["ml.g6.xlarge", "ml.g6.2xlarge"],
        "placed_instance_type": "ml.g6.2xlarge",
        "count": 2,
        "hourly_usd": 1.5,
        "state": "live",
        "started_utc": "2026-12-01T10:00:00.000Z",
    }
    deployment = Deployment.model_validate(old)
    assert deployment.platform == "sagemaker"
    assert (deployment.target, deployment.instance_type) == ("e@us-east-1", "ml.g6.2xlarge")
    assert deployment.record["regions"] == ["us-east-2", "us-east-1"]
    unplaced = Deployment.model_validate({**old, "region": None, "placed_instance_type": None})
    assert (unplaced.target, unplaced.instance_type) == ("e@us-east-2", "ml.g6.xlarge")
    # Written again, it has the new shape, which reads back as itself.
    again = Deployment.model_validate(deployment.model_dump())
    assert again == deployment


def test_quota_is_an_optional_member_sagemakers_says_what_it_could_not_read() -> None:
    """The dry run asks each platform for its quota lines through the registry: one without the
    member (a plug-in's, the loopback example's) has none; SageMaker's without credentials says
    so, and with no deployed arm of its own says nothing."""
    plan = parse_plan(
        'name = "p"\n[[arm]]\nname = "a"\ntarget = "http://127.0.0.1:9"\n'
        '[[arm]]\nname = "b"\n[arm.sagemaker]\nmodel = "org/m"\n'
    )
    assert quota_lines(cast(Platform, _NotAPlatform()), None, plan) == []
    sagemaker = platform_of("sagemaker")
    assert isinstance(sagemaker, KnowsQuota)
    spec = DeploySpec(
        name="b", model_id="org/m", region="us-east-2", role_arn="arn:aws:iam::123456789012:role/r"
    )
    assert quota_lines(sagemaker, Checked(plan, {"b": spec}, None), plan) == [
        "quota: not checked (no AWS credentials)"
    ]
    assert quota_lines(sagemaker, Checked(plan, {}, None), plan) == []


def test_a_sagemaker_quota_line_weighs_free_instances_against_the_need() -> None:
    rows = [
        QuotaRow(region="us-east-2", instance_type="ml.g6.xlarge", quota=4, free=2),
        QuotaRow(region="us-east-1", instance_type="ml.g6.xlarge", quota=1, free=1),
        QuotaRow(region="us-west-2", instance_type="ml.g6.xlarge", error="denied"),
    ]
    line = QuotaLine(instance_type="ml.g6.xlarge", needs=2, rows=rows)
    assert line.text() == (
        "quota ml.g6.xlarge (needs 2 at once): us-east-2 2 free of 4 ok; "
        "us-east-1 1 free of 1 too few; us-west-2 ? free of ?"
    )
    register_secret("s3cr3t-value-for-quota")
    failed = QuotaLine(instance_type="ml.g6.xlarge", needs=1, error="token s3cr3t-value-for-quota")
    assert failed.text() == f"quota ml.g6.xlarge: not checked (token {MASK})"


def test_a_bare_name_is_resolved_by_the_platform_that_claims_bare_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """targets asks the platform registry; with no platform claiming bare names, a bare NAME is
    one line of bad input, never an import of SageMaker."""
    assert isinstance(platform_of("sagemaker"), NamesEndpoints)
    monkeypatch.setattr(registry, "platforms", lambda: {})
    with pytest.raises(UserError, match="no installed platform names endpoints by a bare name"):
        parse_target("my-endpoint")
    assert parse_target("my-endpoint@us-east-2") == SageMakerTarget("my-endpoint", "us-east-2")


def test_a_running_endpoint_is_described_by_the_platform_its_target_names() -> None:
    """An arm whose target is a SageMaker endpoint (not deployed by the run) waits for its
    metrics and speaks no OpenAI API, as SageMaker says through the registry; a URL is no
    platform's."""
    assert isinstance(platform_of("sagemaker"), KnowsEndpoints)
    facts = endpoint_facts(SageMakerTarget("e", "us-east-2"))
    assert facts is not None
    assert (facts.waits_for_metrics, facts.speaks_openai, facts.kind) == (
        True,
        False,
        "a SageMaker endpoint",
    )
    assert endpoint_facts(OpenAITarget("http://127.0.0.1:9/v1")) is None
