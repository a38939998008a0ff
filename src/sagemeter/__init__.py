"""sagemeter: which checkpoint, on which machine, at what price?"""

from __future__ import annotations

from functools import cache

__all__ = ["__version__"]


@cache
def _installed_version() -> str:
    # importlib.metadata costs about 70 ms to import: every process that imports sagemeter (a
    # load's batch workers, the truth server, the engine's worker) would pay it at start-up for
    # a string most of them never read, so it is read on first use.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sagemeter")
    except PackageNotFoundError:  # running from a source tree without an install
        return "0.0.0+source"


def __getattr__(name: str) -> str:
    """`sagemeter.__version__`, read from the install's metadata when first asked for."""
    if name == "__version__":
        return _installed_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
