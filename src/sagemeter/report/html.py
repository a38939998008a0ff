"""The report as one self-contained HTML page: plots inline as base64 PNG, no fetches at all.

Readable on a phone: fluid width, images that shrink, wide tables that scroll inside their own
box instead of widening the page. Winners are marked with a text badge rather than an emoji, so
the mark shows on machines without a colour-emoji font.
"""

from __future__ import annotations

import base64
import re
from html import escape

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

CSS = """
:root { --fg: #1b1b1b; --muted: #595959; --line: #d6d6d6; --best: #e3effa; --accent: #0072b2;
  --warn-bg: #fff3dc; --warn-edge: #e69f00; --ok: #007a5a; --miss: #b84a00; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: #fff;
  font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 64rem; margin: 0 auto; padding: 1rem; }
h1 { font-size: 1.6rem; line-height: 1.25; margin: .5rem 0 1rem; }
h2 { font-size: 1.25rem; margin: 2.2rem 0 .8rem; padding-bottom: .2rem;
  border-bottom: 2px solid var(--line); }
.lede { font-size: 1.05rem; }
nav ol { display: flex; flex-wrap: wrap; gap: .2rem 1rem; padding: 0; margin: 1rem 0;
  list-style: none; font-size: .9rem; }
a { color: var(--accent); }
.scroll { overflow-x: auto; -webkit-overflow-scrolling: touch; margin: 1rem 0;
  border: 1px solid var(--line); border-radius: 4px; }
table { border-collapse: collapse; font-size: .9rem; width: 100%; }
caption { caption-side: top; text-align: left; padding: .4rem .6rem; color: var(--muted);
  font-size: .85rem; }
th, td { padding: .4rem .6rem; text-align: left; vertical-align: top;
  border-bottom: 1px solid var(--line); }
th { background: #f4f4f4; font-weight: 600; min-width: 5.5rem; }
td { min-width: 5.5rem; max-width: 22rem; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td small { display: block; color: var(--muted); font-size: .75rem; line-height: 1.3;
  font-weight: 400; }
td.best { background: var(--best); font-weight: 600; }
.badge { display: inline-block; font-size: .7rem; font-weight: 700; color: #fff;
  background: var(--accent); border-radius: 3px; padding: 0 .3rem; margin-right: .3rem;
  vertical-align: .1em; }
.ok { color: var(--ok); font-weight: 700; }
.miss { color: var(--miss); font-weight: 700; }
figure { margin: 1.2rem 0; }
figure img { display: block; width: 100%; max-width: 800px; height: auto;
  border: 1px solid var(--line); }
figcaption { font-size: .85rem; color: var(--muted); margin-top: .3rem; }
.warning { background: var(--warn-bg); border-left: 4px solid var(--warn-edge);
  padding: .5rem .8rem; margin: 1rem 0; }
pre { overflow-x: auto; background: #f6f6f6; padding: .7rem; font-size: .8rem; }
code { font-family: "DejaVu Sans Mono", ui-monospace, monospace; font-size: .9em; }
@media (max-width: 600px) {
  body { font-size: 15px; } main { padding: .6rem; } th, td { padding: .3rem .4rem; }
}
"""
MARKS = {"ok": ("ok", "✓"), "miss": ("miss", "✗")}
_CODE = re.compile(r"`([^`]+)`")


def inline(text: str) -> str:
    """Escape, then turn `code` spans (the report's only inline markup) into <code>."""
    return _CODE.sub(r"<code>\1</code>", escape(text))


def render_cell(cell: Cell) -> str:
    classes = [c for c in ("num" if cell.numeric else "", "best" if cell.best else "") if c]
    attrs = f' class="{" ".join(classes)}"' if classes else ""
    body = escape(cell.text)
    if cell.mark:
        css, glyph = MARKS[cell.mark]
        word = "correct" if cell.mark == "ok" else "wrong"
        body = f'<span class="{css}" title="{word}">{glyph}</span> {body}'
    if cell.best:
        body = f'<span class="badge" title="winner of this row">★ best</span>{body}'
    if cell.note:
        body += f"<small>{escape(cell.note)}</small>"
    return f"<td{attrs}>{body}</td>"


def render_table(table: Table) -> str:
    head = "".join(f'<th scope="col">{escape(h)}</th>' for h in table.header)
    rows = "".join("<tr>" + "".join(render_cell(c) for c in row) + "</tr>" for row in table.rows)
    caption = f"<caption>{escape(table.caption)}</caption>" if table.caption else ""
    return (
        f'<div class="scroll"><table>{caption}<thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table></div>"
    )


def render_block(block: Block, images: dict[str, bytes]) -> str:
    if isinstance(block, Paragraph):
        return f"<p>{inline(block.text)}</p>"
    if isinstance(block, Table):
        return render_table(block)
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{inline(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Callout):
        return (
            f'<p class="warning" role="note"><strong>⚠ Warning:</strong> {inline(block.text)}</p>'
        )
    if isinstance(block, Code):
        return "<pre><code>" + escape("\n".join(block.lines)) + "</code></pre>"
    if isinstance(block, Figure):
        png = images.get(block.key)
        if png is None:
            return ""
        data = base64.b64encode(png).decode("ascii")
        return (
            f'<figure id="plot-{block.key}"><img src="data:image/png;base64,{data}" '
            f'alt="{escape(block.caption)}" width="1200" height="675">'
            f"<figcaption>{escape(block.caption)}</figcaption></figure>"
        )
    raise TypeError(f"unknown block {block!r}")


def render_html(document: Document, images: dict[str, bytes]) -> str:
    """`images` maps a plot key to its PNG bytes; each is inlined where the report shows it."""
    nav = "".join(
        f'<li><a href="#{s.anchor}">{escape(s.title)}</a></li>' for s in document.sections
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(document.title)}</title>",
        f"<style>{CSS}</style></head><body><main>",
        f"<h1>{escape(document.title)}</h1>",
        *(f'<p class="lede">{inline(text)}</p>' for text in document.lede),
        f'<nav aria-label="sections"><ol>{nav}</ol></nav>',
    ]
    for section in document.sections:
        parts.append(f'<section id="{section.anchor}"><h2>{escape(section.title)}</h2>')
        parts += [html for block in section.blocks if (html := render_block(block, images))]
        parts.append("</section>")
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"
