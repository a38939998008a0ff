"""Plug-ins by entry point, one loader for every kind (engines, platforms, figures).

A plug-in is an object named in an entry-point group (`sagemeter.engines`,
`sagemeter.platforms`, ...); sagemeter's own are listed the same way, and are also loaded from
their module paths when the package's metadata is not installed (a source checkout on the path).
A plug-in that does not import, or does not keep its kind's protocol, is one line saying why
rather than an error for every other plug-in of its kind.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from importlib import import_module
from importlib.metadata import entry_points
from typing import TypeGuard, TypeVar

T = TypeVar("T")


def import_object(where: str) -> object:
    """`module:attribute`, as an entry point names an object."""
    module, _, attribute = where.partition(":")
    return getattr(import_module(module), attribute)


def load_group(
    group: str,
    built_in: Mapping[str, str],
    kind: str,
    keeps_protocol: Callable[[object], TypeGuard[T]],
) -> dict[str, T | str]:
    """Every `kind` installed in `group` by entry-point name (each keeping the protocol and
    named as its entry point), or the one line saying why it cannot load; a built-in whose
    entry point is missing or broken is loaded from `built_in`'s module path."""
    found: dict[str, T | str] = {}
    for point in entry_points(group=group):
        found[point.name] = load_one(point.name, point.load, kind, keeps_protocol)
    for name, where in built_in.items():
        if not keeps_protocol(found.get(name)):
            from_module = functools.partial(import_object, where)
            found[name] = load_one(name, from_module, kind, keeps_protocol)
    return found


def load_one(
    name: str,
    load: Callable[[], object],
    kind: str,
    keeps_protocol: Callable[[object], TypeGuard[T]],
    problem: Callable[[object], str | None] | None = None,
) -> T | str:
    """The object `load` gives, if it keeps `kind`'s protocol and is named `name`; else the one
    line saying why not (`problem`'s, when the kind says it in its own words)."""
    try:
        plugin = load()
    except Exception as exc:  # a plug-in's own import error, whatever it is
        return f"the {kind} plug-in {name!r} could not be loaded: {type(exc).__name__}: {exc}"
    if problem is not None and (why := problem(plugin)) is not None:
        return why
    named = problem is not None or getattr(plugin, "name", None) == name
    if not keeps_protocol(plugin) or not named:
        return (
            f"the {kind} plug-in {name!r} ({type(plugin).__name__}) is not a sagemeter {kind} "
            f"whose name is {name!r}; see docs/extending.md"
        )
    return plugin
