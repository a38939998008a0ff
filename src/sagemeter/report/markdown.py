"""The report as GitHub-flavoured markdown: `report.md` beside the run's result files.

Winners get the article's 🥇, answers ✅ / ❌; each figure's spread is small print under it.
Plots are linked as relative PNG paths, so the file reads well on GitHub and in any viewer.
"""

from __future__ import annotations

import re

from sagemeter.report.document import (
    Block,
    Bullets,
    Callout,
    Cell,
    Code,
    Document,
    Figure,
    Paragraph,
    Table,
)
from sagemeter.report.figures import MEDAL

MARKS = {"ok": "✅", "miss": "❌"}
_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")


def escape(text: str) -> str:
    """Data (model replies, names) must not turn into markup or break a table row."""
    return _SPECIAL.sub(r"\\\1", " ".join(text.split()))


def render_cell(cell: Cell) -> str:
    text = escape(cell.text)
    if cell.mark:
        text = f"{MARKS[cell.mark]} {text}"
    if cell.best:
        text = f"{MEDAL} **{text}**"
    if cell.note:
        text += f"<br><sub>{escape(cell.note)}</sub>"
    return text


def render_table(table: Table) -> list[str]:
    lines = []
    if table.caption:
        lines += [f"*{table.caption}*", ""]
    lines.append("| " + " | ".join(escape(h) or " " for h in table.header) + " |")
    aligns = ["---:" if _numeric_column(table, i) else "---" for i in range(len(table.header))]
    lines.append("| " + " | ".join(aligns) + " |")
    for row in table.rows:
        lines.append("| " + " | ".join(render_cell(c) for c in row) + " |")
    return lines


def _numeric_column(table: Table, index: int) -> bool:
    cells = [row[index] for row in table.rows if index < len(row)]
    return bool(cells) and all(c.numeric for c in cells)


def render_block(block: Block, images: dict[str, str]) -> list[str]:
    if isinstance(block, Paragraph):
        return [block.text]
    if isinstance(block, Table):
        return render_table(block)
    if isinstance(block, Bullets):
        return [f"- {item}" for item in block.items]
    if isinstance(block, Callout):
        return [f"> ⚠️ **Warning:** {block.text}"]
    if isinstance(block, Code):
        return ["```text", *block.lines, "```"]
    if isinstance(block, Figure):
        if block.key not in images:
            return []
        return [f"![{block.caption}]({images[block.key]})", "", f"*{block.caption}*"]
    raise TypeError(f"unknown block {block!r}")


def render_markdown(document: Document, images: dict[str, str]) -> str:
    """`images` maps a plot key to the relative path of its PNG; plots not drawn are left out."""
    lines = [f"# {document.title}", ""]
    for text in document.lede:
        lines += [text, ""]
    lines += ["Contents: " + " · ".join(f"[{s.title}](#{s.anchor})" for s in document.sections)]
    lines.append("")
    for section in document.sections:
        lines += [f'<a id="{section.anchor}"></a>', "", f"## {section.title}", ""]
        for block in section.blocks:
            rendered = render_block(block, images)
            if rendered:
                lines += [*rendered, ""]
    return "\n".join(lines).rstrip() + "\n"
