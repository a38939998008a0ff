"""The report as plain blocks, built once and rendered twice (markdown and HTML).

Keeping what a report says apart from how it is drawn means the two formats can never disagree
on a figure, and tests can check the content by parsing either one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Mark = Literal["ok", "miss"]


@dataclass
class Cell:
    """One table cell: the figure, its spread or other small print, and how it is marked."""

    text: str
    note: str = ""
    best: bool = False
    mark: Mark | None = None
    numeric: bool = False


@dataclass
class Table:
    header: list[str]
    rows: list[list[Cell]]
    caption: str = ""


@dataclass
class Paragraph:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Callout:
    """A warning the reader must not miss (settings that differ, failed requests, …)."""

    text: str


@dataclass
class Figure:
    """A plot by its key in the plots module; renderers skip keys that were not drawn."""

    key: str
    caption: str


@dataclass
class Code:
    lines: list[str]


Block = Table | Paragraph | Bullets | Callout | Figure | Code


@dataclass
class Section:
    title: str
    anchor: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    title: str
    lede: list[str]
    sections: list[Section]


def cell(text: str, note: str = "", *, best: bool = False, numeric: bool = True) -> Cell:
    """A figure; a figure that is not known ("n/a") gets no small print about its spread."""
    return Cell(text=text, note="" if text == "n/a" else note, best=best, numeric=numeric)


def label(text: str) -> Cell:
    return Cell(text=text, numeric=False)
