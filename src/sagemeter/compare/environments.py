"""Whether the compared results ran on the same hardware and server software.

A ratio is the checkpoints' only when everything else was the same. A SageMaker run can place A,
B and A′ on different instance types of a fallback list, or resolve a tag to a different image
digest between deploys; local runs can come from different machines. Each difference is one
warning line naming the files and what each recorded. A fact no file records says nothing; a fact
only some files record is named as `not recorded` for the others, since sameness cannot be shown.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sagemeter.engine_registry import started_here
from sagemeter.results import Environment, MeasureResult

HARDWARE = "a speed ratio between them is partly the hardware's, not the checkpoints'"
SOFTWARE = "a ratio between them is partly the server software's, not the checkpoints'"


def _instance_types(env: Environment) -> str | None:
    placed = env.server.get("instance_types")
    if isinstance(placed, list) and placed:
        return " / ".join(str(kind) for kind in placed)
    return None


def _image_digest(env: Environment) -> str | None:
    """The digest ours record beside the tag; the article's files record the image by digest."""
    digest = env.server.get("image_digest")
    if digest:
        return str(digest)
    image = env.server.get("image")
    return str(image) if image and "@sha256:" in str(image) else None


def _image(env: Environment) -> str | None:
    image = env.server.get("image")
    return str(image) if image else None


def _host(read: Callable[[Environment], object]) -> Callable[[Environment], str | None]:
    """A host fact, only where the server ran on the measuring host (not SageMaker or a URL)."""

    def fact(env: Environment) -> str | None:
        value = read(env)
        return str(value) if started_here(env.backend) and value is not None else None

    return fact


CHECKS: tuple[tuple[str, Callable[[Environment], str | None], str], ...] = (
    ("placed instance type", _instance_types, HARDWARE),
    ("image digest", _image_digest, SOFTWARE),
    ("engine", lambda env: env.engine, SOFTWARE),
    ("engine version", lambda env: env.engine_version, SOFTWARE),
    ("host CPU", _host(lambda env: env.host_cpu), HARDWARE),
    ("host core count", _host(lambda env: env.host_cores), HARDWARE),
)


def environment_differences(paths: list[Path], results: list[MeasureResult]) -> list[str]:
    """One warning line per fact the results disagree on, naming each file's value."""
    envs = [
        (path.name, result.detail.environment if result.detail else None)
        for path, result in zip(paths, results, strict=True)
    ]
    checks = list(CHECKS)
    if not any(env and _image_digest(env) for _, env in envs):
        checks.insert(2, ("image", _image, SOFTWARE))  # no digest anywhere: the URI is all
    warnings = []
    for label, read, consequence in checks:
        values = [(name, read(env) if env else None) for name, env in envs]
        recorded = {value for _, value in values}
        if len(recorded) < 2:  # the same everywhere, or recorded nowhere
            continue
        listed = ", ".join(f"{name} {value or 'not recorded'}" for name, value in values)
        warnings.append(f"{label} differs: {listed}; {consequence}")
    return warnings


def busy_hosts(paths: list[Path], results: list[MeasureResult]) -> list[str]:
    """One note per result measured on a busy host (`detail.host`): its figures may be low."""
    notes = []
    for path, result in zip(paths, results, strict=True):
        host = result.detail.host if result.detail else None
        note = host.busy_note() if host else None
        if note:
            notes.append(f"{path.name}: {note}")
    return notes
