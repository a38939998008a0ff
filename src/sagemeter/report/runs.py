"""A run folder read for a report: its result files in run order, their comparison, the price.

When `compare.json` (written by `combine`, `demo` and `run`, A first) names its files, the run is
exactly those files in that order: another measure-*.json in the folder (a stray copy, a test
run) is left out, and the report and `sagemeter report` say so in one note. A `sagemeter run`
folder stopped before its comparison has no compare.json but its journal: the run is the files
the journal's plan names that were measured, in the order `combine` takes them, and others are
left out the same way. Without either, the run is every measure-*.json, ordered by start time,
else by file name (and the report says so).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sagemeter.compare import Comparison, combine
from sagemeter.compare.costs import check_price
from sagemeter.errors import UserError
from sagemeter.experiment.journal import read_journal
from sagemeter.experiment.plan import plan_from_data
from sagemeter.experiment.steps import combine_order
from sagemeter.results import MeasureResult, load_result
from sagemeter.textfiles import read_json

COMPARE_FILE = "compare.json"
JOURNAL_FILE = "journal.json"  # experiment.journal's; not imported, so a report stays light


@dataclass
class Run:
    """Everything a report needs from one folder."""

    folder: Path
    results: list[MeasureResult]
    paths: list[Path]
    comparison: Comparison | None
    price_per_hour: float | None
    order_source: str = field(default="file names")
    experiment_order: str | None = None  # how `sagemeter run` ordered them (ABA, interleaved…)
    left_out: list[str] = field(default_factory=list)  # measure files compare.json does not name
    order_note: str | None = None  # the planned order beside the measured one, when they differ
    named_by: str = COMPARE_FILE  # the file that names the run's files (compare.json, journal)

    @property
    def label(self) -> str:
        return self.folder.name or str(self.folder)

    @property
    def is_aba(self) -> bool:
        return self.comparison is not None and self.comparison.drift is not None

    @property
    def contenders(self) -> list[MeasureResult]:
        """The distinct checkpoints compared: every result but the A' re-measure of A-B-A."""
        return self.results[:-1] if self.is_aba else self.results


def load_run(folder: Path, *, price_per_hour: float | None = None) -> Run:
    """Read a run folder; a missing folder, no result files or a bad file is one UserError."""
    if not folder.exists():
        raise UserError(f"{folder}: no such folder")
    if not folder.is_dir():
        raise UserError(f"{folder}: not a folder (give the run folder that holds measure-*.json)")
    found = sorted(folder.glob("measure-*.json"))
    check_price(price_per_hour)
    saved_order, saved_price, experiment_order, order_note, time_order = _read_compare_file(
        folder / COMPARE_FILE
    )
    named_by = COMPARE_FILE
    if not saved_order:
        from_journal = _journal_files(folder)
        if from_journal is not None and from_journal[0]:
            saved_order, time_order = from_journal
            named_by = JOURNAL_FILE
    if saved_order:
        found = _named_files(folder, saved_order)
    elif not found:
        raise UserError(f"{folder}: no result files (measure-*.json) in this folder")
    results = {path: load_result(path) for path in found}
    paths, source = _run_order(found, results, saved_order, named_by)
    price = price_per_hour if price_per_hour is not None else saved_price
    comparison = (
        combine(paths, price_per_hour=price, time_order=time_order) if len(paths) >= 2 else None
    )
    return Run(
        folder=folder,
        results=[results[path] for path in paths],
        paths=paths,
        comparison=comparison,
        price_per_hour=price,
        order_source=source,
        experiment_order=experiment_order,
        left_out=_left_out(folder, saved_order),
        order_note=order_note,
        named_by=named_by,
    )


def _journal_files(folder: Path) -> tuple[list[str], list[str] | None] | None:
    """A `sagemeter run` folder without its compare.json (stopped before the comparison): the
    result files its plan names that exist, in `combine`'s order, and the time order the run
    measured them in (when it knows all of them); None when the folder holds no journal."""
    if not (folder / JOURNAL_FILE).is_file():
        return None

    journal = read_journal(folder)
    plan = plan_from_data(journal.plan, str(folder / JOURNAL_FILE))
    names = [name for name in combine_order(plan) if (folder / f"measure-{name}.json").is_file()]
    last = {name: index for index, name in enumerate(journal.measured)}
    time_order = None
    if not plan.interleaved and names and all(name in last for name in names):
        time_order = sorted(names, key=last.__getitem__)
    return [f"measure-{name}.json" for name in names], time_order


def _named_files(folder: Path, names: list[str]) -> list[Path]:
    """compare.json's files in its order; one it names that is missing is one UserError."""
    missing = [
        name for name in names if not (folder / name).exists() and not (folder / name).is_symlink()
    ]  # one there but not a regular file is named by the read itself (a FIFO, a device)
    if missing:
        raise UserError(
            f"{folder / COMPARE_FILE}: names {missing[0]}, which is not in {folder}; restore it, "
            f"or remove {COMPARE_FILE} to report every measure-*.json in the folder"
        )
    return [folder / name for name in names]


def _left_out(folder: Path, named: list[str]) -> list[str]:
    if not named:
        return []
    return sorted(path.name for path in folder.glob("measure-*.json") if path.name not in named)


def left_out_note(run: Run) -> str | None:
    """The one line that says which measure files the report leaves out, and why."""
    if not run.left_out:
        return None
    return (
        f"left out {', '.join(run.left_out)}: {run.named_by} names the run's files "
        f"({', '.join(path.name for path in run.paths)}) and the report follows it"
    )


def _read_compare_file(
    path: Path,
) -> tuple[list[str], float | None, str | None, str | None, list[str] | None]:
    """File names in run order, the price, the experiment's order and its note, and the order
    the run measured them in (when its journal knew it), from compare.json."""
    if not path.exists() and not path.is_symlink():
        return [], None, None, None, None

    payload = read_json(path)  # capped; a FIFO, NaN or Infinity is one line
    if not isinstance(payload, dict):
        raise UserError(f"{path}: expected the JSON object that `sagemeter combine` writes")
    files = payload.get("files") or []
    price = payload.get("price_per_hour")
    if not isinstance(files, list) or not all(isinstance(name, str) for name in files):
        raise UserError(f"{path}: 'files' must be a list of result file names")
    if price is not None and not (isinstance(price, int | float) and price > 0):
        raise UserError(f"{path}: 'price_per_hour' must be a positive number")
    order, note = payload.get("order"), payload.get("order_note")
    return (
        [Path(name).name for name in files],
        None if price is None else float(price),
        order if isinstance(order, str) else None,
        note if isinstance(note, str) else None,
        _names(payload.get("time_order")),
    )


def _names(value: object) -> list[str] | None:
    """A list of result names as compare.json keeps it; anything else is not one."""
    if isinstance(value, list) and all(isinstance(name, str) for name in value):
        return value
    return None


def _run_order(
    found: list[Path], results: dict[Path, MeasureResult], saved: list[str], named_by: str
) -> tuple[list[Path], str]:
    if saved:
        return found, named_by  # already compare.json's (or the journal's) files, in its order
    starts = {
        path: result.detail.environment.started_utc
        for path, result in results.items()
        if result.detail is not None
    }
    if len(starts) == len(found):
        return sorted(found, key=lambda path: (starts[path], path.name)), "start times"
    return found, "file names"
