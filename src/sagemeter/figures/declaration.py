"""What a figure is: one declaration says its key, unit, better direction, format, label, how
`combine` compares it between arms, and how it is computed from a measurement's records.

sagemeter's own figures (`builtin.py`) and a plug-in's (the entry-point group
`sagemeter.figures`) are declared the same way; the result's top level, the comparison's rows,
the report's tables, the terminal's and the MCP replies read them from the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from sagemeter.results.model import Detail, MeasureResult

Better = Literal["higher", "lower", "none"]
Compared = Literal["ratio", "difference", "none"]
# Where the comparison and the report place a figure's row, and when the row is shown:
# startup (always), decode (always), call (always, after the predicted-decode rows),
# streaming (some file has a decode phase), prefill (some file ran the prefill phase),
# more (after the per-level rows; shown when some file has a value). sagemeter's own, not a
# plug-in's: predicted (after decode: the checkpoint's tokens per GB read), ceiling (after it:
# the decode ceiling a plan predicted), each shown when some file has a value of the group;
# quality (the count of correct answers, after the more rows; always shown); slo (the cost at
# the SLO, last, when some file searched for it: `combine` builds these rows itself).
Group = Literal[
    "startup",
    "decode",
    "predicted",
    "ceiling",
    "call",
    "streaming",
    "prefill",
    "more",
    "quality",
    "slo",
]
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
    # A cost: the price per hour over the named figure's tokens/s (x 3600 / 10^6), at the
    # comparison's price when it has one (the SLO's cost), else as the result recorded it.
    priced_from: str | None = None
    # A count (of correct answers): its row is a `count` row, whose ratio no interval or A-A'
    # drift judges (the quality verdict judges the answers).
    counted: bool = False
    # False for a size or a prediction, the same on every run: no interval or A-A' drift
    # judges its ratio.
    drifts: bool = True

    def compute(self, detail: Detail) -> float | None:
        return self.compute_with(detail)


# Where the comparison and the report place a level family's rows, each level's rows together
# in declaration order: load (after the prefill figures), long_prompt (after the load rows),
# endpoint (after the count of correct answers: an endpoint's own figures per phase), cost
# (after the endpoint rows, only with a price; needs `priced_from`).
LevelGroup = Literal["load", "long_prompt", "endpoint", "cost"]
LEVEL_GROUPS: tuple[str, ...] = ("load", "long_prompt", "endpoint", "cost")
LevelValues = Mapping[str, float | None]


@runtime_checkable
class LevelFamily(Protocol):
    """A family of figures, one per level of a phase (requests at once, a prompt length): the
    throughput at each concurrency, the first token's wait at each long-prompt level.

    The result holds a family at its top level under `name`, as `{level: value}` (a level
    without an honest figure is null); each level is a row of its own in `combine`, keyed
    `key_template` with the level in place of `{level}`.
    """

    @property
    def name(self) -> str:
        """The result's top-level key holding {level: value}."""
        ...

    @property
    def key_template(self) -> str:
        """Each level's row: "load_c{level}_tokens_per_second"."""
        ...

    @property
    def label_template(self) -> str:
        """The report's words for a level's row: "{level} at once (tokens/s)"."""
        ...

    @property
    def level_name(self) -> str:
        """What a level is: "concurrency"."""
        ...

    @property
    def level_unit(self) -> str:
        """A level in words: "requests at once"."""
        ...

    @property
    def unit(self) -> str:
        """The figures' unit: "tokens/s"."""
        ...

    @property
    def better(self) -> str:
        """Better: which way is a win ("higher", "lower"; "none": no winner is marked)."""
        ...

    @property
    def compared(self) -> str:
        """Compared: how combine sets each file against the first (B/A, B − A, none)."""
        ...

    @property
    def digits(self) -> int | None:
        """Decimals kept at the top level."""
        ...

    @property
    def speed(self) -> bool:
        """Speed figures: their A-A' drift judges the ratios, their rows are `speed`."""
        ...

    @property
    def group(self) -> str:
        """LevelGroup: where its rows go (load, long_prompt, cost)."""
        ...

    @property
    def stored(self) -> bool:
        """Held at the result's top level (a cost is priced when compared)."""
        ...

    def compute(self, detail: Detail) -> LevelValues | None:
        """Each level's figure from the measurement's records (None: the phase did not run)."""
        ...


@dataclass(frozen=True)
class LevelFigure:
    """A level family's declaration (sagemeter's own, or a plug-in's).

    sagemeter's own families are written by the phase that measures them (`compute_with`
    None); a plug-in's are computed here from the records and rounded to `digits`.
    """

    name: str
    key_template: str
    label_template: str
    level_name: str
    level_unit: str
    unit: str
    better: str = "none"
    compared: str = "ratio"
    digits: int | None = 3
    speed: bool = False
    group: str = "load"
    stored: bool = True
    compute_with: Callable[[Detail], LevelValues | None] | None = None
    # The terminal's words for a level's row when the comparison table is narrow.
    short_template: str | None = None
    # A cost family: the price per hour over the named family's tokens/s at the same level.
    priced_from: str | None = None
    # A family not held at the top level (not `stored`) but read off the result where it is
    # kept (an endpoint's CloudWatch figures per phase, in the detail): {level: value}.
    read: Callable[[MeasureResult], LevelValues] | None = None
    # Levels that are names (a phase: "decode", "long prompts"), kept in the order the files
    # hold them, rather than numbers (requests at once), kept in numeric order.
    named_levels: bool = False

    def compute(self, detail: Detail) -> LevelValues | None:
        return None if self.compute_with is None else self.compute_with(detail)


def level_key(family: LevelFamily, level: int | str) -> str:
    """The comparison row of `family` at `level`: `load_c16_tokens_per_second`."""
    return family.key_template.replace("{level}", str(level))


def level_of_key(family: LevelFamily, key: str) -> str | None:
    """The level whose row `key` is, when it is one of `family`'s rows; else None."""
    before, _, after = family.key_template.partition("{level}")
    if len(key) <= len(before) + len(after) or not key.startswith(before):
        return None
    if not key.endswith(after):
        return None
    level = key[len(before) : len(key) - len(after)]
    return level if level.isdigit() or getattr(family, "named_levels", False) else None


def level_label(family: LevelFamily, level: int | str) -> str:
    """The report's words for `family`'s row at `level`."""
    return family.label_template.replace("{level}", str(level))


def level_short(family: LevelFamily, level: int | str) -> str | None:
    """The terminal's short words for the row, when the family declares them."""
    template = getattr(family, "short_template", None)
    return None if template is None else str(template).replace("{level}", str(level))


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


def family_problem(family: LevelFamily, name: str) -> str | None:
    """Why the level family `family` cannot be registered as `name`, in one line; None when it
    can."""
    if family.name != name:
        return f"the figure plug-in {name!r} declares the family {family.name!r}, not {name!r}"
    if family.key_template.count("{level}") != 1 or "{level}" not in family.label_template:
        return f"the figure plug-in {name!r}: its key and label templates need one {{level}}"
    if family.better not in BETTER:
        return f"the figure plug-in {name!r}: better must be one of {', '.join(BETTER)}"
    if family.compared not in COMPARED:
        return f"the figure plug-in {name!r}: compared must be one of {', '.join(COMPARED)}"
    if family.group not in LEVEL_GROUPS:
        return f"the figure plug-in {name!r}: group must be one of {', '.join(LEVEL_GROUPS)}"
    priced = getattr(family, "priced_from", None) is not None
    read = getattr(family, "read", None) is not None
    if (family.group == "cost") != priced or family.stored == (priced or read):
        return (
            f"the figure plug-in {name!r}: a cost family (group cost, priced_from) is not "
            "stored, and every other family is"
            + (" but one read off the result (read)" if read else "")
        )
    return None
