"""What a figure is: one declaration says its key, unit, better direction, format, label, how
`combine` compares it between arms, and how it is computed from a measurement's records.

sagemeter's own figures (`builtin.py`) and a plug-in's (the entry-point group
`sagemeter.figures`) are declared the same way; the result's top level, the comparison's rows,
the report's tables, the terminal's and the MCP replies read them from the registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from sagemeter.results.model import Detail, MeasureResult

Better = Literal["higher", "lower", "none"]
Compared = Literal["ratio", "difference", "none"]
# Where the comparison and the report place a figure's row, and when the row is shown:
# startup (always), decode (always), call (always, after the predicted-decode rows),
# streaming (some file has a decode phase), prefill (some file ran the prefill phase),
# more (after the per-level rows; shown when some file has a value).
Group = Literal["startup", "decode", "call", "streaming", "prefill", "more"]
GROUPS: tuple[str, ...] = ("startup", "decode", "call", "streaming", "prefill", "more")
BETTER: tuple[str, ...] = ("higher", "lower", "none")
COMPARED: tuple[str, ...] = ("ratio", "difference", "none")


@runtime_checkable
class Figure(Protocol):
    """One figure of a measurement, declared once.

    `compute` gets the measurement's `detail` (every record of every phase) and returns the
    figure, or None when the records cannot give an honest one. A figure is written at the
    result's top level under `key` when `stored`; one that is not (an engine's own rate) is
    computed again from the detail where it is shown.
    """

    key: str  # the result's top-level key and the comparison row's
    label: str  # the report's and the terminal's words: "Inter-token latency, p99 (ms)"
    unit: str  # "tokens/s", "ms", "s", "GiB", "tokens"
    better: str  # Better: which way is a win (none: no winner is marked)
    compared: str  # Compared: how combine sets each arm against the first (B/A, B − A, none)
    digits: int | None  # decimals kept at the top level; None: kept as computed (an integer)
    integer: bool  # shown with thousands separators, no decimals (a count of tokens)
    speed: bool  # a speed figure: its A-A' drift judges the ratios, its row is a `speed` row
    group: str  # Group: where its rows go
    stored: bool  # written at the result's top level

    def compute(self, detail: Detail) -> float | None:
        """The figure from the measurement's records (None: no honest figure)."""
        ...


@dataclass(frozen=True)
class Declared:
    """A figure declaration (sagemeter's own, or a plug-in's: any object keeping `Figure`)."""

    key: str
    label: str
    unit: str
    compute_with: Callable[[Detail], float | None]
    better: str = "none"
    compared: str = "ratio"
    digits: int | None = 3
    integer: bool = False
    speed: bool = False
    group: str = "more"
    stored: bool = True
    # How a comparison reads the figure off a result, when not its top-level value (a few
    # built-ins compare the unrounded median of the detail, as they always have).
    read: Callable[[MeasureResult], float | None] | None = None
    # The terminal's words for the key when the comparison table is narrow.
    short: str | None = None

    def compute(self, detail: Detail) -> float | None:
        return self.compute_with(detail)


def problem_with(figure: object, name: str) -> str | None:
    """Why `figure` is not a figure named `name`, in one line; None when it is."""
    if not isinstance(figure, Figure):
        return f"the figure plug-in {name!r} ({type(figure).__name__}) is not a sagemeter figure"
    if figure.key != name:
        return f"the figure plug-in {name!r} declares the key {figure.key!r}, not {name!r}"
    if figure.better not in BETTER:
        return f"the figure plug-in {name!r}: better must be one of {', '.join(BETTER)}"
    if figure.compared not in COMPARED:
        return f"the figure plug-in {name!r}: compared must be one of {', '.join(COMPARED)}"
    if figure.group not in GROUPS:
        return f"the figure plug-in {name!r}: group must be one of {', '.join(GROUPS)}"
    return None
