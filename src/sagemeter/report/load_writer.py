"""Write the report of `sagemeter load` results (markdown, HTML, PNG plots), atomically.

A result file FILE.json gets FILE-report.md, FILE-report.html and FILE-plots/*.png beside it; a
folder of result files (and no measure-*.json, whose report it would otherwise be) gets
report.md, report.html and plots/*.png inside it, one report over all its load results.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from sagemeter.atomic import write_bytes_atomic, write_text_atomic
from sagemeter.errors import UserError
from sagemeter.loadgen.files import load_result
from sagemeter.loadgen.result import RESULT_KIND, LoadResult
from sagemeter.loadgen.sessions import SessionLoadResult
from sagemeter.report.html import render_html
from sagemeter.report.load_figures import LoadRun
from sagemeter.report.load_plots import render_load_plots
from sagemeter.report.load_sections import build_load_document
from sagemeter.report.markdown import render_markdown
from sagemeter.report.writer import check_report_outputs, parse_formats, shown_figures
from sagemeter.textfiles import probe_json, read_json


def is_load_result_file(path: Path) -> bool:
    """A JSON file whose `kind` is a load result's (read only as far as that)."""
    if not path.is_file() or path.suffix != ".json":
        return False
    payload = probe_json(path)
    return isinstance(payload, dict) and payload.get("kind") == RESULT_KIND


def load_result_paths(path: Path) -> list[Path] | None:
    """The load result files `report` should show for `path`, or None when `path` is a run
    folder for the measure report (it holds measure-*.json, or no load result at all)."""
    if not path.exists() and path.suffix == ".json":
        raise UserError(f"{path}: no such file")
    if path.exists() and not path.is_dir():
        try:  # a FIFO, a device or a NaN is one line naming it; any other file is "not one"
            payload = read_json(path)
        except UserError as exc:
            if path.is_file() and "not a finite number" not in str(exc):
                payload = None
            else:
                raise
        if not (isinstance(payload, dict) and payload.get("kind") == RESULT_KIND):
            raise UserError(
                f"{path}: not a folder, nor a `sagemeter load` result file (give a run folder, "
                "or a file `load --out` wrote)"
            )
        return [path]
    if not path.is_dir() or any(path.glob("measure-*.json")):
        return None
    found = [p for p in sorted(path.glob("*.json")) if is_load_result_file(p)]
    return found or None


def _read(path: Path) -> LoadResult:
    """A load result, with its sessions' figures when it has them (`load --sessions`)."""
    result = load_result(path)  # the shape checked, with one clear line when it does not fit
    payload = read_json(path)
    if not isinstance(payload, dict) or payload.get("sessions") is None:
        return result

    try:
        return SessionLoadResult.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise UserError(f"{path}: not a sessions result ({where}: {first['msg']})") from None


def output_paths(path: Path) -> tuple[Path, Path, Path]:
    """(markdown, HTML, plots folder) of the report of `path` (a file or a folder)."""
    if path.is_file():
        stem = path.stem
        return (
            path.with_name(f"{stem}-report.md"),
            path.with_name(f"{stem}-report.html"),
            path.with_name(f"{stem}-plots"),
        )
    return path / "report.md", path / "report.html", path / "plots"


def write_load_report(
    path: Path, files: list[Path], formats: str | Iterable[str] = ("md", "html", "png")
) -> list[Path]:
    """Read every load result in `files` (one bad file: one UserError before anything is
    written), then write the report of `path` as asked; returns the paths written."""
    chosen = parse_formats(formats)
    runs = [LoadRun(label=file.stem, result=_read(file), path=file) for file in files]
    document = build_load_document(runs)
    shown = shown_figures(document)
    markdown_path, html_path, plots_dir = output_paths(path)
    check_report_outputs(markdown_path, html_path, plots_dir, shown, chosen)
    images = render_load_plots(runs, shown) if {"png", "html"} & set(chosen) else {}
    written: list[Path] = []
    links: dict[str, str] = {}
    if "png" in chosen:
        for key, png in images.items():
            target = plots_dir / f"{key}.png"
            write_bytes_atomic(target, png)
            written.append(target)
            links[key] = f"{plots_dir.name}/{key}.png"
    if "md" in chosen:
        write_text_atomic(markdown_path, render_markdown(document, links))
        written.append(markdown_path)
    if "html" in chosen:
        write_text_atomic(html_path, render_html(document, images))
        written.append(html_path)
    return written
