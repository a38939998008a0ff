"""Reading a text file a person gave: its text, or one UserError line naming the file.

Questions, results, load results and fidelity records are UTF-8. A file saved as UTF-16 (what
some Windows editors and PowerShell's `>` write) or a binary file given by mistake would
otherwise end in a UnicodeDecodeError traceback.
"""

from __future__ import annotations

import codecs
from pathlib import Path

from sagemeter.errors import UserError


def read_utf8(path: Path) -> str:
    """The text of `path`, or one UserError line: missing, a folder, unreadable, not UTF-8."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a folder, not a file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return decode_utf8(path, raw)


def decode_utf8(path: Path, raw: bytes) -> str:
    """`raw` (the bytes of `path`) as text; UTF-16 and other encodings are named, not decoded."""
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise UserError(f"{path}: is UTF-16 text; save it as UTF-8")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{path}: is not UTF-8 text (byte {exc.start} is 0x{raw[exc.start]:02x}); "
            "save it as UTF-8"
        ) from None
