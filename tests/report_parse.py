"""Read a written report back the way a person would: by section, table and cell, never by bytes."""

from __future__ import annotations

import json
import re
import shutil
import struct
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

DATA_DIR = Path(__file__).parent / "data"
FIXED_RUN = DATA_DIR / "report-run"

SECTION_TITLES = [
    "What was compared",
    "Start-up facts",
    "Decode speed",
    "Parallel requests",
    "Answer quality",
    "Re-measured in A-B-A order",
    "Price/performance",
    "So, which one?",
    "Scope",
]
SECTION_ANCHORS = [
    "compared",
    "startup",
    "decode",
    "parallel",
    "quality",
    "aba",
    "price",
    "which-one",
    "scope",
]


def copy_run(source: Path, dest: Path) -> Path:
    """A writable copy of a committed run folder (reports are written into the folder)."""
    shutil.copytree(source, dest)
    return dest


def mark_incomplete(result_file: Path, reasons: list[str]) -> None:
    """Edit a real result file as `measure` writes one that misses a figure it asked for."""
    payload = json.loads(result_file.read_text(encoding="utf-8"))
    payload["complete"] = False
    payload["incomplete_because"] = reasons
    result_file.write_text(json.dumps(payload), encoding="utf-8")


# --- markdown ---------------------------------------------------------------------------------


def md_title(text: str) -> str:
    first = text.splitlines()[0]
    assert first.startswith("# "), first
    return first[2:]


def md_sections(text: str) -> dict[str, str]:
    """Section title → its body, in the order the `## ` headings appear."""
    sections: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            sections[current] = ""
        elif current is not None:
            sections[current] += line + "\n"
    return sections


@dataclass
class MdCell:
    text: str
    note: str = ""

    @property
    def best(self) -> bool:
        return self.text.startswith("🥇")

    @property
    def value(self) -> str:
        """The figure without its marks: no medal, no bold, no ✅/❌."""
        return (
            self.text.removeprefix("🥇")
            .strip()
            .strip("*")
            .removeprefix("✅")
            .removeprefix("❌")
            .strip()
        )


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def _cell(raw: str) -> MdCell:
    main, _, note = raw.strip().partition("<br><sub>")
    return MdCell(_unescape(main.strip()), _unescape(note.removesuffix("</sub>").strip()))


def md_tables(body: str) -> list[list[list[MdCell]]]:
    """Every GFM table in a section body: rows of cells, header row first, separator dropped."""
    tables: list[list[list[MdCell]]] = []
    current: list[list[MdCell]] = []
    for line in [*body.splitlines(), ""]:
        if line.startswith("|"):
            cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
            if all(re.fullmatch(r"\s*:?-{3,}:?\s*", c) for c in cells):
                continue
            current.append([_cell(c) for c in cells])
        elif current:
            tables.append(current)
            current = []
    return tables


def md_callouts(body: str) -> list[str]:
    """The text of every warning callout (`> ⚠️ **Warning:** …`) in a section body."""
    prefix = "> ⚠️ **Warning:** "
    return [
        _unescape(line.removeprefix(prefix))
        for line in body.splitlines()
        if line.startswith(prefix)
    ]


def md_images(text: str) -> list[str]:
    return re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)


def rows_by_label(table: list[list[MdCell]]) -> dict[str, list[MdCell]]:
    """Body rows keyed by their first cell's text."""
    return {row[0].text: row[1:] for row in table[1:]}


# --- HTML -------------------------------------------------------------------------------------


@dataclass
class HtmlTable:
    section: str | None
    rows: list[list[str]] = field(default_factory=list)
    best_cells: list[str] = field(default_factory=list)


class ReportHtml(HTMLParser):
    """Sections, tables (cell text), images, and every URL the page would load or link."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[str] = []
        self.headings: list[str] = []
        self.tables: list[HtmlTable] = []
        self.images: list[dict[str, str | None]] = []
        self.urls: list[str] = []
        self.tags: set[str] = set()
        self.meta: list[dict[str, str | None]] = []
        self.warnings: list[tuple[str | None, str]] = []  # (section, callout text)
        self._warning: list[str] | None = None
        self._cell: list[str] | None = None
        self._cell_best = False
        self._heading: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.add(tag)
        for key in ("src", "href", "srcset", "data", "poster", "action"):
            if found.get(key):
                self.urls.append(str(found[key]))
        if tag == "section":
            self.sections.append(str(found.get("id")))
        elif tag == "h2":
            self._heading = []
        elif tag == "table":
            self.tables.append(HtmlTable(self.sections[-1] if self.sections else None))
        elif tag == "tr":
            self.tables[-1].rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
            self._cell_best = "best" in (found.get("class") or "").split()
        elif tag == "img":
            self.images.append(found)
        elif tag == "meta":
            self.meta.append(found)
        elif tag == "p" and "warning" in (found.get("class") or "").split():
            self._warning = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            text = " ".join("".join(self._cell).split())
            self.tables[-1].rows[-1].append(text)
            if self._cell_best:
                self.tables[-1].best_cells.append(text)
            self._cell = None
        elif tag == "h2" and self._heading is not None:
            self.headings.append("".join(self._heading).strip())
            self._heading = None
        elif tag == "p" and self._warning is not None:
            section = self.sections[-1] if self.sections else None
            self.warnings.append((section, " ".join("".join(self._warning).split())))
            self._warning = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._heading is not None:
            self._heading.append(data)
        if self._warning is not None:
            self._warning.append(data)


def parse_html(text: str) -> ReportHtml:
    parser = ReportHtml()
    parser.feed(text)
    parser.close()
    return parser


# --- PNG --------------------------------------------------------------------------------------


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk; fails unless the bytes are a PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def png_ink(path_or_bytes: Path | bytes) -> tuple[float, int]:
    """(share of pixels that are not near-white, number of distinct colours): is anything drawn?"""
    import io

    import numpy as np
    from PIL import Image

    raw = path_or_bytes.read_bytes() if isinstance(path_or_bytes, Path) else path_or_bytes
    pixels = np.asarray(Image.open(io.BytesIO(raw)).convert("RGB")).reshape(-1, 3)
    inked = float((pixels.min(axis=1) < 235).mean())
    colours = len(np.unique(pixels[:: max(1, len(pixels) // 200_000)], axis=0))
    return inked, colours
