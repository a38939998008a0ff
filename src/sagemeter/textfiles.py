"""Reading a file a person gave: its text, or one UserError line naming the file.

Questions, results, load results and fidelity records are UTF-8. A file saved as UTF-16 (what
some Windows editors and PowerShell's `>` write) or a binary file given by mistake would
otherwise end in a UnicodeDecodeError traceback. Every read is bounded: a named pipe would block
forever and a device (`/dev/zero`) never ends, so only regular files are read, and only up to a
size that fits what the file is for.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import stat
from pathlib import Path
from typing import Any

from sagemeter.errors import UserError

MIB = 1 << 20
RESULTS_CAP = 256 * MIB  # a load result with every raw record of a long run is tens of MiB
LOG_CAP = 64 * MIB  # a server log: its start-up facts are in the first few hundred lines
PLAN_CAP = 1 * MIB  # an experiment plan is a page of TOML (the examples are under 4 KiB)
QUESTIONS_CAP = 32 * MIB  # a question set is a few thousand JSON lines
TOKENIZER_CAP = 128 * MIB  # a tokenizer.json of a large vocabulary is tens of MiB
CONFIG_CAP = 64 * MIB  # a checkpoint's config.json or safetensors index (tens of KiB)
TRACE_CAP = 256 * MIB  # a Mooncake trace of a day's requests is tens of MiB


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def read_capped(path: Path, cap: int, what: str = "") -> bytes:
    """The bytes of `path` if it is a regular file of at most `cap` bytes; else one UserError
    line (missing, a folder, a pipe or device, too large, unreadable). `what` names the file's
    role in the message (`--server-log`)."""
    label = f"{what} {path}" if what else str(path)
    try:  # O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise UserError(f"{label}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{label}: is a folder, not a file") from None
    except OSError as exc:
        raise UserError(f"{label}: cannot be read ({exc.strerror or exc})") from None
    with contextlib.closing(_Fd(fd)):
        mode, size = os.fstat(fd).st_mode, os.fstat(fd).st_size
        if stat.S_ISDIR(mode):
            raise UserError(f"{label}: is a folder, not a file")
        if not stat.S_ISREG(mode):
            raise UserError(f"{label}: is {_kind(mode)}, not a regular file; give a file")
        if size > cap:
            raise UserError(
                f"{label}: is {size / MIB:.1f} MiB, more than the {cap // MIB} MiB read"
            )
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        left = cap + 1
        try:
            while left > 0 and (chunk := os.read(fd, min(left, MIB))):
                chunks.append(chunk)
                left -= len(chunk)
        except OSError as exc:
            raise UserError(f"{label}: cannot be read ({exc.strerror or exc})") from None
    if left <= 0:  # it grew past the cap while being read
        raise UserError(f"{label}: is more than the {cap // MIB} MiB read")
    return b"".join(chunks)


class _Fd:
    """A raw descriptor closed by `contextlib.closing`."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        os.close(self.fd)


def read_utf8(path: Path, cap: int = RESULTS_CAP, what: str = "") -> str:
    """The text of `path`, or one UserError line: missing, a folder, a pipe or device, larger
    than `cap`, unreadable, not UTF-8."""
    return decode_utf8(path, read_capped(path, cap, what), what)


def decode_utf8(path: Path, raw: bytes, what: str = "") -> str:
    """`raw` (the bytes of `path`) as text; UTF-16 and other encodings are named, not decoded.
    A UTF-8 byte-order mark is dropped; a NUL byte (a binary file) is refused."""
    label = f"{what} {path}" if what else str(path)
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise UserError(f"{label}: is UTF-16 text; save it as UTF-8")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{label}: is not UTF-8 text (byte {exc.start} is 0x{raw[exc.start]:02x}); "
            "save it as UTF-8"
        ) from None
    if "\x00" in text:
        raise UserError(
            f"{label}: holds a NUL byte (at byte {raw.index(0)}), so it is no text file"
        )
    return text


def read_json(path: Path, cap: int = RESULTS_CAP, what: str = "") -> Any:
    """The JSON value in `path` (read as `read_utf8` reads), or one UserError line: not JSON,
    or a NaN or Infinity anywhere in it, named by its key. No file sagemeter writes holds one (a
    figure it could not measure is null), so one read back is a hand edit, and a NaN would pass
    through every comparison and interval unnoticed: every result, load result and comparison
    read back is read here."""
    import json

    text = read_utf8(path, cap, what)
    label = f"{what} {path}" if what else str(path)
    try:
        payload = json.loads(text, parse_constant=_NotAFigure)
    except json.JSONDecodeError as exc:
        raise UserError(f"{label}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise UserError(f"{label}: nested too deeply to be a sagemeter file") from None
    found = _first_constant(payload, ())
    if found is not None:
        where, constant = found
        key = ".".join(map(str, where)) or "the file"
        raise UserError(
            f"{label}: {key}: {constant.text} is not a finite number; give a finite number or null"
        )
    return payload


class _NotAFigure:
    """Where the file held NaN, Infinity or -Infinity (found after parsing, to name its key)."""

    def __init__(self, text: str) -> None:
        self.text = text


def _first_constant(
    value: object, where: tuple[str | int, ...]
) -> tuple[tuple[str | int, ...], _NotAFigure] | None:
    stack: list[tuple[object, tuple[str | int, ...]]] = [(value, where)]
    while stack:  # iterative: a deeply nested file that json accepted is no recursion error
        item, at = stack.pop()
        if isinstance(item, _NotAFigure):
            return at, item
        if isinstance(item, dict):
            stack.extend((child, (*at, key)) for key, child in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((child, (*at, index)) for index, child in reversed(list(enumerate(item))))
    return None


def probe_json(path: Path, cap: int = RESULTS_CAP) -> Any:
    """The JSON value in `path`, or None for anything that cannot be read as JSON (for a
    question like "is this a load result?", whose answer is then no)."""
    try:
        return read_json(path, cap)
    except UserError:
        return None


def read_log(path: Path, cap: int = LOG_CAP, what: str = "") -> str:
    """A log's text: like `read_utf8`, except that bytes that are not UTF-8 (a progress bar's
    control codes, a line cut at the cap) become U+FFFD instead of refusing the whole log; a
    UTF-16 log is still named, since read as UTF-8 it would say nothing at all."""
    raw = read_capped(path, cap, what)
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        label = f"{what} {path}" if what else str(path)
        raise UserError(f"{label}: is UTF-16 text; save it as UTF-8")
    return raw.decode("utf-8-sig", errors="replace")
