"""Write a run's report (markdown, HTML, PNG plots) into its folder: the call `demo`, the CLI
and the MCP server share.

Every file is written atomically, so a reader sees the old report, none, or the whole new one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from sagemeter.atomic import (
    check_output_file,
    refuse_special,
    write_bytes_atomic,
    write_text_atomic,
)
from sagemeter.errors import UserError
from sagemeter.report.compare_runs import build_compare_document
from sagemeter.report.document import Document, Figure
from sagemeter.report.html import render_html
from sagemeter.report.markdown import render_markdown
from sagemeter.report.plots import Series, palette, render_plots
from sagemeter.report.rows import name_of
from sagemeter.report.runs import Run, left_out_note, load_run
from sagemeter.report.sections import build_document

FORMATS = ("md", "html", "png")
PLOTS_DIR = "plots"


def parse_formats(text: str | Iterable[str]) -> tuple[str, ...]:
    """'md,html,png' (any subset, any order) → the formats in canonical order."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    wanted = {part.strip().lower() for part in parts if part.strip()}
    unknown = sorted(wanted - set(FORMATS))
    if unknown or not wanted:
        raise UserError(
            f"--format {','.join(parts)!r}: choose from md, html, png (comma-separated)"
        )
    return tuple(f for f in FORMATS if f in wanted)


def run_series(run: Run, prefix: str = "", linestyle: str = "-", marker: str = "o") -> list[Series]:
    """How each result of a run is drawn; an A-B-A re-measure takes A's colour, dashed."""
    series = []
    for index, result in enumerate(run.results):
        again = run.is_aba and index == len(run.results) - 1
        series.append(
            Series(
                label=f"{prefix}{name_of(result)}" + (" (A′)" if again else ""),
                result=result,
                color=palette(0 if again else index),
                linestyle="--" if again else linestyle,
                marker="s" if again else marker,
                price_per_hour=run.price_per_hour,
            )
        )
    return series


def check_report_outputs(
    markdown: Path, html: Path, plots: Path, keys: list[str], formats: tuple[str, ...]
) -> None:
    """Every file a report will write, checked before a plot is drawn (the one output rule,
    `atomic.check_output_file`): a report is rewritten each time, but never through a link,
    into a FIFO or onto a device, and never over a result; `plots` must be a folder."""
    outputs = [markdown] if "md" in formats else []
    outputs += [html] if "html" in formats else []
    if "png" in formats:
        if plots.is_symlink() or (plots.exists() and not plots.is_dir()):
            refuse_special(plots, "the plots folder")
            raise UserError(f"the plots folder {plots}: is a file, not a folder")
        outputs += [plots / f"{key}.png" for key in keys]
    for path in outputs:
        check_output_file(path, "the report", force=True)


def shown_figures(document: Document) -> list[str]:
    """The keys of the figures a document shows, in order."""
    return [
        block.key
        for section in document.sections
        for block in section.blocks
        if isinstance(block, Figure)
    ]


def _write(
    document: Document, series: list[Series], out_dir: Path, formats: tuple[str, ...]
) -> list[Path]:
    shown = shown_figures(document)
    paths = (out_dir / "report.md", out_dir / "report.html", out_dir / PLOTS_DIR)
    check_report_outputs(*paths, shown, formats)
    images = render_plots(series, shown) if {"png", "html"} & set(formats) else {}
    written: list[Path] = []
    links: dict[str, str] = {}
    if "png" in formats:
        for key, png in images.items():
            path = out_dir / PLOTS_DIR / f"{key}.png"
            write_bytes_atomic(path, png)
            written.append(path)
            links[key] = f"{PLOTS_DIR}/{key}.png"
    if "md" in formats:
        path = out_dir / "report.md"
        write_text_atomic(path, render_markdown(document, links))
        written.append(path)
    if "html" in formats:
        path = out_dir / "report.html"
        write_text_atomic(path, render_html(document, images))
        written.append(path)
    return written


def write_report(
    run_dir: Path,
    formats: str | Iterable[str] = FORMATS,
    *,
    price_per_hour: float | None = None,
    note: Callable[[str], None] | None = None,
) -> list[Path]:
    """Write `report.md`, `report.html` and `plots/*.png` (as asked) into `run_dir`.

    The price defaults to the one recorded in the folder's compare.json. Bad input (missing
    folder, no result files, an unreadable file) is one UserError. Returns the paths written;
    `note` hears what a person should know about the run read (files it leaves out).
    """
    chosen = parse_formats(formats)
    run = load_run(run_dir, price_per_hour=price_per_hour)
    left_out = left_out_note(run)
    if note is not None and left_out is not None:
        note(left_out)
    return _write(build_document(run), run_series(run), run_dir, chosen)


def default_compare_dir(first: Path, second: Path) -> Path:
    return first / f"compare-{second.resolve().name}"


def write_compare_report(
    first: Path,
    second: Path,
    formats: str | Iterable[str] = FORMATS,
    *,
    out_dir: Path | None = None,
    price_per_hour: float | None = None,
) -> list[Path]:
    """Two run folders side by side, into `out_dir` (default FIRST/compare-SECOND)."""
    chosen = parse_formats(formats)
    run_a = load_run(first, price_per_hour=price_per_hour)
    run_b = load_run(second, price_per_hour=price_per_hour)
    target = out_dir or default_compare_dir(first, second)
    series = [
        *_contender_series(run_a, f"{run_a.label}: ", "-", "o"),
        *_contender_series(run_b, f"{run_b.label}: ", ":", "s"),
    ]
    return _write(build_compare_document(run_a, run_b), series, target, chosen)


def _contender_series(run: Run, prefix: str, linestyle: str, marker: str) -> list[Series]:
    series = run_series(run, prefix, linestyle, marker)
    return series[: len(run.contenders)]
