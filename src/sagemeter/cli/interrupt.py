"""What the running command is doing and which files it has finished, for the Ctrl-C message.

Every finished file passes through `atomic.write_bytes_atomic`, which notes it; the faces say
what they are doing. When the user interrupts, the message says what was interrupted and what
was kept, so nobody has to guess whether a file on disk is whole (every one listed is).
"""

from __future__ import annotations

import threading

from sagemeter.atomic import forget_written, written_files

_lock = threading.Lock()
_doing: list[str] = []


def reset() -> None:
    """Forget what earlier commands of this process did (a face starting a new command)."""
    with _lock:
        _doing.clear()
    forget_written()


def doing(what: str) -> None:
    """Say what the command is doing now (replaces the previous statement)."""
    with _lock:
        _doing[:] = [what]


def interrupted_message() -> str:
    """One line: what was interrupted, and what was kept."""
    with _lock:
        what = _doing[0] if _doing else "the command"
    files = written_files()
    if not files:
        return f"interrupted while {what}: nothing was written; nothing half-written was left"
    shown = ", ".join(str(path) for path in files[:4])
    more = f" and {len(files) - 4} more" if len(files) > 4 else ""
    return (
        f"interrupted while {what}: kept {len(files)} finished file"
        f"{'s' if len(files) != 1 else ''} ({shown}{more}); nothing half-written was left"
    )
