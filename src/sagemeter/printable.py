"""Text from files and servers, fit for a terminal: control and escape characters shown escaped.

A question file or a server's error body may hold ANSI escapes (which recolour, retitle or clear
the terminal, or write to its clipboard) or a bare CR (which overwrites what was printed before
it). Printed raw, they act; escaped, they show as `\\x1b`, `\\r`, and the line stays one line.

Every console sagemeter prints through is a `SafeConsole`: whatever it is given (a string, a
table cell, a panel), the text it writes has its control characters escaped, and only rich's
own control sequences (colours, the live display's cursor moves) reach the terminal as such.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment

# C0 controls but tab, DEL and the C1 range (U+0080–U+009F holds the 8-bit CSI, U+009B).
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_CONTROL_BUT_NEWLINE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable_json(text: str) -> str:
    """JSON text for a terminal: `json.dumps` escapes C0 controls but leaves DEL and the C1
    range (U+009B is a CSI) raw; inside a JSON string `\\u009b` means the same character."""
    return re.sub(r"[\x7f-\x9f]", lambda match: f"\\u{ord(match.group()):04x}", text)


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with every control character (newlines too, unless kept) written as its escape."""
    pattern = _CONTROL_BUT_NEWLINE if keep_newlines else _CONTROL
    return pattern.sub(lambda match: match.group().encode("unicode_escape").decode(), text)


class SafeConsole(Console):
    """A rich Console whose text never acts on the terminal: every segment of text is escaped
    (`printable`, newlines and tabs kept) as it is written; rich's own styles and control
    segments are applied as usual."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment
            if segment.control
            else Segment(printable(segment.text, keep_newlines=True), segment.style)
            for segment in buffer
        )
