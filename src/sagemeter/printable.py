"""Text from files and servers, fit for a terminal: control and escape characters shown escaped.

A question file or a server's error body may hold ANSI escapes (which recolour, retitle or clear
the terminal, or write to its clipboard) or a bare CR (which overwrites what was printed before
it). Printed raw, they act; escaped, they show as `\\x1b`, `\\r`, and the line stays one line.
"""

from __future__ import annotations

import re

# C0 controls but tab, DEL and the C1 range (U+0080–U+009F holds the 8-bit CSI, U+009B).
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_CONTROL_BUT_NEWLINE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with every control character (newlines too, unless kept) written as its escape."""
    pattern = _CONTROL_BUT_NEWLINE if keep_newlines else _CONTROL
    return pattern.sub(lambda match: match.group().encode("unicode_escape").decode(), text)
