"""The line shown while an engine starts: how long it has taken and the last line of its log.

vLLM compiles for minutes and llama.cpp loads for seconds; a bare "starting" gives no sign of
life, so the wait line names what the engine last said. Only the log's tail is read (a vLLM log
grows to megabytes), a tqdm bar's carriage returns count as line ends, and colour codes and other
control characters never reach the terminal.
"""

from __future__ import annotations

import re
from pathlib import Path

from sagemeter.printable import printable

TAIL_BYTES = 8192
LINE_MAX_CHARS = 120
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def last_log_line(path: Path) -> str | None:
    """The last non-empty line of the log at `path` (at most LINE_MAX_CHARS), or None."""
    try:
        with path.open("rb") as log:
            log.seek(0, 2)
            size = log.tell()
            log.seek(max(0, size - TAIL_BYTES))
            tail = log.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    lines = [_ANSI.sub("", line).strip() for line in re.split(r"[\r\n]", tail)]
    useful = [line for line in lines if line]
    if not useful:
        return None
    line = printable(useful[-1])
    return line if len(line) <= LINE_MAX_CHARS else line[: LINE_MAX_CHARS - 1] + "…"


def wait_line(what: str, elapsed_s: float, log_path: Path) -> str:
    """`starting vLLM: 42 s; log: Capturing CUDA graphs …` (or `…: 42 s` before any log)."""
    last = last_log_line(log_path)
    said = f"; log: {last}" if last else ""
    return f"{what}: {elapsed_s:.0f} s{said}"
