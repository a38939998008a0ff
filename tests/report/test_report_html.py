"""report.html: self-contained, every section and plot present, and rendered by a real browser.

Headless Chromium (Debian's `chromium`, which `.ci/run` installs) opens the page at a phone's
width and at 800 px; the test measures what it laid out (tables, images, page width) and takes a
full-page screenshot, checking sizes, not pixels.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from sagemeter.report.writer import write_report
from tests.chromium import Browser
from tests.report_parse import (
    FIXED_RUN,
    SECTION_ANCHORS,
    SECTION_TITLES,
    copy_run,
    mark_incomplete,
    parse_html,
    png_ink,
    png_size,
)

LAYOUT = """JSON.stringify({
  viewport: window.innerWidth,
  pageWidth: document.documentElement.scrollWidth,
  pageHeight: document.documentElement.scrollHeight,
  tables: [...document.querySelectorAll('table')].map(t => {
    const box = t.getBoundingClientRect(), frame = t.parentElement.getBoundingClientRect();
    return {w: box.width, h: box.height, rows: t.rows.length, frameW: frame.width,
            scrolls: getComputedStyle(t.parentElement).overflowX};
  }),
  images: [...document.images].map(i => ({complete: i.complete, natural: i.naturalWidth,
    naturalH: i.naturalHeight, w: i.getBoundingClientRect().width,
    h: i.getBoundingClientRect().height})),
  sections: [...document.querySelectorAll('section')].map(s => s.id),
})"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = copy_run(FIXED_RUN, tmp_path_factory.mktemp("html") / "run")
    write_report(run, "html")
    return run / "report.html"


def test_html_has_every_section_table_and_plot_inline(report: Path) -> None:
    page = parse_html(report.read_text(encoding="utf-8"))
    assert page.sections == SECTION_ANCHORS
    assert page.headings == SECTION_TITLES
    by_section = {t.section for t in page.tables}
    assert {"compared", "startup", "decode", "parallel", "quality", "aba", "which-one"} <= (
        by_section
    )
    which = next(t for t in page.tables if t.section == "which-one")
    assert which.rows[0] == ["", "smollm2-f32", "smollm2-q4_1", "why"]
    assert any(cell.startswith("★ best") for cell in which.best_cells)
    quality = [t for t in page.tables if t.section == "quality"]
    assert any("✗" in cell for row in quality[-1].rows for cell in row)  # the misses, marked
    assert any(row[0] == "Questions to decide" for row in quality[1].rows)  # the verdict
    assert len(page.images) == 4  # throughput, reply-time fit, latency, quality (no price)
    for image in page.images:
        src = str(image["src"])
        assert src.startswith("data:image/png;base64,")
        width, height = png_size(base64.b64decode(src.split(",", 1)[1]))
        assert (width, height) == (1200, 675)
        assert image["alt"]


def test_html_fetches_nothing_and_fits_a_phone(report: Path) -> None:
    page = parse_html(report.read_text(encoding="utf-8"))
    external = [url for url in page.urls if not url.startswith(("data:", "#"))]
    assert external == []
    assert not ({"script", "link", "iframe", "object", "embed"} & page.tags)
    viewport = next(m for m in page.meta if m.get("name") == "viewport")
    assert "width=device-width" in str(viewport["content"])


@pytest.mark.slow
@pytest.mark.parametrize(("width", "mobile"), [(390, True), (800, False)])
def test_chromium_renders_the_tables_and_images(
    report: Path, tmp_path: Path, width: int, mobile: bool
) -> None:
    shot = tmp_path / f"report-{width}.png"
    with Browser() as browser:
        browser.open(report, width=width, height=900, mobile=mobile)
        layout = json.loads(browser.evaluate(LAYOUT))
        png = browser.screenshot(shot)
    assert layout["sections"] == SECTION_ANCHORS
    # The page itself never scrolls sideways: wide tables scroll inside their own frame.
    assert layout["pageWidth"] <= layout["viewport"]
    assert len(layout["tables"]) >= 10
    for table in layout["tables"]:
        assert table["rows"] >= 2 and table["h"] > 20 and table["w"] > 100
        assert table["frameW"] <= layout["viewport"]
        assert table["scrolls"] == "auto"
    assert len(layout["images"]) == 4
    for image in layout["images"]:
        assert image["complete"] and (image["natural"], image["naturalH"]) == (1200, 675)
        assert 0 < image["w"] <= min(800, layout["viewport"])
        assert abs(image["h"] / image["w"] - 675 / 1200) < 0.01  # drawn whole, not squashed
    shot_width, shot_height = png_size(png)
    assert layout["viewport"] - 20 <= shot_width <= layout["viewport"]  # less a scrollbar
    assert shot_height >= 3000  # the whole page, far beyond one screen
    inked, colours = png_ink(png)
    assert inked > 0.05 and colours > 50  # text, tables and plots were painted


def test_an_incomplete_result_is_a_warning_at_the_top_of_the_page(tmp_path: Path) -> None:
    run = copy_run(FIXED_RUN, tmp_path / "run")
    missing = "decode rate: no decode rate: 2 short and 5 long replies were complete"
    mark_incomplete(run / "measure-smollm2-f32-again.json", [missing])
    write_report(run, "html")
    page = parse_html((run / "report.html").read_text(encoding="utf-8"))
    assert page.warnings[0] == (
        "compared",
        f"⚠ Warning: smollm2-f32-again is incomplete, a figure it asked for is missing: {missing}",
    )
