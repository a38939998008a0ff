"""Platforms are plug-ins: where a run's endpoints are deployed and billed, by plan table name.

A platform is one object (the `Platform` protocol) registered under the entry-point group
`sagemeter.platforms`, its entry point's name being the name of the plan table that asks for it
(`sagemaker` for `[arm.sagemaker]`). sagemeter's own is registered the same way in its
pyproject.toml; another distribution adds one by naming an object in that group. The experiment
runner, its journal and its estimate reach every platform only through this module.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard, runtime_checkable

from pydantic import BaseModel

from sagemeter.errors import ManyProblems, SagemeterError, UserError
from sagemeter.platforms.deployment import Deployment
from sagemeter.plugins import load_group

if TYPE_CHECKING:
    from sagemeter.experiment.plan import Arm, Plan
    from sagemeter.results.predicted_decode import PredictedDecode
    from sagemeter.targets import Target

GROUP = "sagemeter.platforms"
# sagemeter's own platform, also declared in its pyproject.toml: found even when the installed
# metadata is older than the source (an editable install not yet refreshed).
BUILT_IN = {"sagemaker": "sagemeter.sagemaker.platform:SAGEMAKER"}


class CheckProblems(ManyProblems):
    """Every problem a platform's `check` found, one line each; `failure`, the first that was
    not bad input (a cloud failure), decides the exit code of the whole report."""

    def __init__(self, problems: list[str], failure: SagemeterError | None = None) -> None:
        super().__init__("plan", problems)
        self.failure = failure


@dataclass(frozen=True)
class Price:
    """What one arm is estimated to cost per hour before it is deployed."""

    usd_per_hour: float | None  # per instance; None: unknown (`note` says why)
    note: str
    count: int = 1  # instances billed at once


@dataclass(frozen=True)
class Facts:
    """What the measurement of a deployed arm needs to know of its platform."""

    predicted_decode: PredictedDecode | None = None  # a prediction the result carries beside
    waits_for_metrics: bool = False  # the measure waits for the platform's own metrics after
    speaks_openai: bool = True  # an OpenAI-compatible /v1: Ray batches and an SLO search work
    kind: str = "an OpenAI-compatible endpoint"  # what its endpoints are, for a problem's line
    live: str = "live"  # the word for an endpoint that answers (SageMaker's "InService")


@dataclass
class Hooks:
    """What the runner lends a platform while it deploys, adopts or deletes."""

    save: Callable[[], None]  # write the journal now (before a create call, after a change)
    # Each poll's news: one line (str), or SageMaker's Progress, which the faces know. In a
    # deploy or adopt it raises KeyboardInterrupt once a stop is asked for: call it while
    # waiting. In a delete it never raises (a stop's teardown deletes to the end).
    progress: Callable[[Any], None]
    note: Callable[[str], None]  # one line for the person watching
    deleted: Callable[[Any], None]  # what a delete did: one line, or SageMaker's DeleteReport
    poll_s: float  # how often a wait looks again
    price_per_hour: float | None  # the plan's price, which overrides any looked up


@runtime_checkable
class Platform(Protocol):
    """One place endpoints are deployed and billed. Failures are sagemeter errors: bad input
    (InputError, ManyProblems) found by `check`, cloud failures (PlatformError) after."""

    name: str  # the plan table's name: [arm.NAME]

    def table(self, data: Mapping[str, Any]) -> BaseModel:
        """The arm's table as written, validated (a pydantic ValidationError names its keys)."""
        ...

    def plan_problems(self, plan: Plan, arms: Sequence[Arm]) -> list[str]:
        """What is wrong with these arms' tables that needs no account (names that collide)."""
        ...

    def check(
        self, plan: Plan, arms: Sequence[Arm], *, fresh: bool, need_credentials: bool
    ) -> object:
        """Before anything runs: credentials, role, region, quotas, each arm's deploy spec and,
        for a `fresh` run, that its names are free; every problem at once. The answer (the
        platform's own) is handed back to the calls below."""
        ...

    def price(self, checked: object, arm: Arm, price_per_hour: float | None) -> Price:
        """The hourly price the estimate counts for this arm (the most it may be placed at);
        the plan's `price_per_hour`, when given, is the price (none is looked up)."""
        ...

    def creates(self, checked: object, arm: Arm) -> str:
        """What the arm's deploy step creates, for the dry run's table."""
        ...

    def facts(self, arm: Arm) -> Facts: ...

    def deployment(self, checked: object, arm: Arm, result: str) -> Deployment:
        """The journal's record of a deploy about to begin (saved before any create call)."""
        ...

    def deploy(self, checked: object, deployment: Deployment, hooks: Hooks) -> None:
        """Create the endpoint (with any fallbacks) and return once it answers, `deployment`
        filled in (`target`, `instance_type`, `hourly_usd`, `record`); the runner then marks it
        live. Call `hooks.save()` once something exists to find again. A failure raises."""
        ...

    def adopt(self, checked: object, deployment: Deployment, hooks: Hooks) -> bool:
        """On resume: the endpoint the journal records, made live again when it still answers
        (waited out while it starts), `deployment` filled in as by `deploy`; False when it is
        gone or unusable (the runner deletes what may be left, then deploys again)."""
        ...

    def delete(self, checked: object, deployment: Deployment, hooks: Hooks) -> None:
        """Delete whatever the deployment may have left, waiting out a start first."""
        ...

    def target(self, deployment: Deployment) -> Target:
        """Where a live deployment is measured."""
        ...

    def left_running(self, deployment: Deployment) -> str:
        """How to delete a deployment a run left, besides `--resume` (a command to type)."""
        ...


@runtime_checkable
class KnowsQuota(Protocol):
    """A platform's optional member: its account's limits on what the arms need. A platform
    without it has no quota known, and the dry run says nothing of quotas for its arms."""

    def quota(self, checked: object, plan: Plan) -> list[str]:
        """For the dry run, one line per limit: what this platform's arms (those `check` saw)
        need at once against what the account allows, or why it could not be read. A read for
        information only: it never raises for what it could not read."""
        ...


@runtime_checkable
class KnowsEndpoints(Protocol):
    """A platform's optional member: what it says of one of its endpoints that runs already, an
    arm's `target` (a target class naming it by `platform`), as `facts` says of a deployed arm."""

    def endpoint_facts(self, target: Target) -> Facts: ...


def endpoint_facts(target: Target) -> Facts | None:
    """What the platform whose endpoint `target` is says of it; None for a target of no
    platform (a URL, an engine's) or of a platform that says nothing of running endpoints."""
    name = getattr(target, "platform", None)
    if not isinstance(name, str):
        return None
    platform = platform_of(name)
    return platform.endpoint_facts(target) if isinstance(platform, KnowsEndpoints) else None


@runtime_checkable
class NamesEndpoints(Protocol):
    """A platform's optional member: what a bare endpoint NAME (no scheme, no `ENGINE:`, no
    `@REGION`) names on it. One platform claims bare names (sagemeter's own: SageMaker's)."""

    def bare_target(self, name: str, text: str) -> Target:
        """The endpoint `name` names (`text`: the target as written, for a UserError)."""
        ...


def bare_target(name: str, text: str) -> Target | None:
    """What a bare endpoint NAME names, asked of the first installed platform that knows bare
    names; None when none does (`sagemeter.targets` parses every other form itself)."""
    for platform in platforms().values():
        if isinstance(platform, NamesEndpoints):
            return platform.bare_target(name, text)
    return None


def quota_lines(platform: Platform, checked: object, plan: Plan) -> list[str]:
    """The platform's quota lines for the dry run; none when it knows no quota."""
    if isinstance(platform, KnowsQuota):
        return platform.quota(checked, plan)
    return []


@functools.cache
def _loaded() -> dict[str, Platform | str]:
    """Every platform installed by table name, or the one line saying why one cannot load."""
    return load_group(GROUP, BUILT_IN, "platform", _keeps_protocol)


def _keeps_protocol(found: object) -> TypeGuard[Platform]:
    return isinstance(found, Platform)


def platforms() -> dict[str, Platform]:
    """Every platform that loads, by table name: sagemeter's own and the plug-ins'."""
    return {name: found for name, found in _loaded().items() if isinstance(found, Platform)}


def platform_named(name: str) -> Platform | None:
    """The platform of the plan table `[arm.NAME]`, if one is installed; a plug-in of that name
    that cannot load is one UserError saying why."""
    found = _loaded().get(name)
    if isinstance(found, str):
        raise UserError(found)
    return found


def platform_of(name: str) -> Platform:
    """The platform a deployed arm or a journal's deployment names."""
    found = platform_named(name)
    if found is None:
        raise UserError(
            f"no platform {name!r} is installed (a plan table [arm.{name}] or a journal names "
            "it); install the distribution that provides it"
        )
    return found
