"""`long` modules start first when a tier hands out whole modules (`--dist loadfile`).

pytest-xdist's loadfile scheduling gives each worker a module at a time, biggest test count
first. On the slow tier a few modules run for minutes (the real-vLLM one alone for five); one
of them handed out late leaves the other worker idle at the end. A module marked
`pytest.mark.long(SECONDS)`, its seconds measured on that tier's workers, is handed out before
every unmarked one, the longest first: the longest-first rule that leaves the least idle tail.
The others keep xdist's order (most tests first). The order is made in each worker's
collection, the same in all of them, when xdist's own reordering is off
(`--no-loadscope-reorder`, which `scripts/test-tier` gives with `--dist loadfile`); any other
run keeps pytest's order.
"""

from __future__ import annotations

import pytest

MARKER = "long"  # registered in pyproject.toml


def module_seconds(item: pytest.Item) -> float:
    """The seconds a `long` module's marker declares; 0 for any other module."""
    marker = item.get_closest_marker(MARKER)
    return float(marker.args[0]) if marker is not None else 0.0


def longest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The items, each module's kept together and in its own order: `long` modules first,
    longest first, then the rest with the most tests first (ties in collection order)."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    ordered = sorted(
        modules.values(), key=lambda module: (-module_seconds(module[0]), -len(module))
    )
    return [item for module in ordered for item in module]


@pytest.hookimpl(trylast=True)  # after `-m` deselected: a module's count is of its tests that run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # `--no-loadscope-reorder` (xdist's own option, which a worker keeps while its `--dist` reads
    # "no") asks for the modules in collection order: this order.
    if getattr(config.option, "loadscopereorder", True) is False:
        items[:] = longest_first(items)
