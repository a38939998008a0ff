"""scipy's `stats` and `optimize`, imported on first use.

Importing scipy.stats costs about 1.5 s of CPU; results, measure and experiments import this
package for its types and only some runs compute an interval, so every command would otherwise
pay that at start-up.
"""

from __future__ import annotations

import importlib
from typing import Any


def stats() -> Any:
    """`scipy.stats`."""
    return importlib.import_module("scipy.stats")


def optimize() -> Any:
    """`scipy.optimize`."""
    return importlib.import_module("scipy.optimize")
