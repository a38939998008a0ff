"""Write files so a reader never sees half of one: a temp file in the same folder, then rename.

Before a command does any work it checks that it will be able to write its output there
(`check_output_file`, `check_output_folder`), so a finished measurement is never lost to a
folder that is a file, a name too long for the filesystem, or a folder it may not write in.
Every text written goes through `redaction.redact` (a JSON payload's strings before they are
encoded, `redact_tree`, then its text again): no credential reaches a file.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from sagemeter.errors import UserError
from sagemeter.filekinds import kind_of_file
from sagemeter.redaction import redact, redact_tree

PATH_MAX = 4096
WRITE_FAILED = "could not write"  # the note a failed write carries to the face that shows it

# Every file this process finished, in order (what a Ctrl-C message can say was kept).
_written: list[Path] = []
_written_lock = threading.Lock()


def written_files() -> list[Path]:
    """The files written whole by this process since the last `forget_written`."""
    with _written_lock:
        return list(dict.fromkeys(_written))


def forget_written() -> None:
    with _written_lock:
        _written.clear()


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one step; an interrupted write leaves the old file or none.

    A symlink, device or FIFO at `path` is refused, never replaced by a regular file."""
    refuse_special(path, "the output")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_current_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):  # a full disk says which file and what it was doing
            if exc.filename in (None, tmp):
                exc.filename = str(path)
            exc.add_note(WRITE_FAILED)
        raise
    with _written_lock:
        _written.append(path)


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, redact(text).encode("utf-8"))


def write_json_atomic(path: Path, payload: Any) -> None:
    write_text_atomic(path, json.dumps(redact_tree(payload), indent=2, ensure_ascii=False) + "\n")


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def _nearest_existing(path: Path) -> Path:
    current = path
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def missing_folders(folder: Path) -> list[Path]:
    """The folders a `mkdir -p` of `folder` would make, deepest first (none when it exists)."""
    missing = []
    current = folder.absolute()
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    return missing


@contextlib.contextmanager
def removed_if_left_empty(folder: Path) -> Iterator[None]:
    """Around a command that makes `folder`: when it fails, the folders it made and left
    empty are removed (deepest first), so a failure leaves no empty output folder behind. A
    folder that existed before, or holds anything (an engine's log), is kept."""
    made = missing_folders(folder)
    try:
        yield
    except BaseException:
        for path in made:
            try:
                path.rmdir()  # only an empty folder goes
            except OSError:
                break
        raise


def check_output_folder(folder: Path, label: str, *, make: bool = True) -> Path:
    """Prove a file can be written in `folder` (made first when `make`); else one UserError line.

    The proof is a real write (a temporary file, removed at once): permissions, read-only
    mounts and full disks all show there, whoever runs the command. Without `make` a missing
    folder is not made (the write makes it): a command refused later leaves no empty folder,
    and the proof is made in the nearest folder that exists. A symlink to a folder is a folder
    (files are written inside it, the link itself is never replaced).
    """
    text = str(folder)
    if "\x00" in text:
        raise UserError(f"{label} {text!r}: a path cannot hold a NUL character")
    refuse_target_like(folder, label)
    if len(os.fsencode(text)) >= PATH_MAX:
        raise UserError(f"{label}: the path is longer than this system allows ({PATH_MAX} bytes)")
    if folder.exists() and not folder.is_dir():
        kind = _KINDS.get(stat.S_IFMT(folder.stat().st_mode), "a file")
        raise UserError(f"{label} {text}: is {kind}, not a folder")
    if folder.is_symlink() and not folder.exists():
        raise UserError(f"{label} {text}: is a symbolic link to nothing; give a folder")
    existing = _nearest_existing(folder.absolute())
    if not existing.is_dir():
        raise UserError(f"{label} {text}: {existing} is a file, so no folder can be made there")
    for part in folder.absolute().relative_to(existing).parts:
        if len(os.fsencode(part)) > _name_max(existing):
            raise UserError(f"{label} {text}: the name {part[:40]!r}… is too long for this system")
    try:
        if make:
            folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(prefix=".sagemeter-check-", dir=folder if make else existing):
            pass
    except OSError as exc:
        raise UserError(
            f"{label} {text}: cannot write there ({describe_write_error(exc)})"
        ) from None
    return folder


# A target where a file name was meant: `fidelity collect http://… out.json` has its two
# arguments the wrong way round (and would make a folder called `http:`).
_TARGET_LIKE = re.compile(r"^(?:[a-z][a-z0-9+.-]*:/|(?:local|vllm|cmd):)", re.IGNORECASE)


def refuse_target_like(path: Path, label: str) -> None:
    """One UserError line when `path` reads as a URL or a target (local:, vllm:, cmd:)."""
    if _TARGET_LIKE.match(str(path)):
        raise UserError(
            f"{label} {path}: looks like a URL or a target, not a file name; "
            "is the order of the arguments right?"
        )


def check_output_file(
    path: Path,
    label: str,
    *,
    force: bool,
    inputs: Sequence[Path] = (),
    to_replace: str = "use --force to replace it",
    kind: str | None = None,
) -> Path:
    """`path` can be written (or replaced) atomically; else one UserError line, before any work.

    The one rule for every output of every command and face: a new name in a writable folder or
    a regular file, never a symlink, FIFO, device or socket (a rename would replace the device
    itself), never one of the command's own `inputs`, and an existing file only with `force`
    (a finished result is never lost to a slip of the argument order). `kind` is what the
    output will hold (`filekinds`); an existing file that holds a result of another kind is
    never replaced, even with `force` (`combine a.json b.json a2.json` left OUT out).
    No folder is made here: the write makes it.
    """
    text = str(path)
    if "\x00" in text:
        raise UserError(f"{label} {text!r}: a path cannot hold a NUL character")
    refuse_target_like(path, label)
    if path.is_dir() and not path.is_symlink():
        raise UserError(f"{label} {text}: is a folder; give a file name")
    refuse_special(path, label)
    for given in inputs:
        if _same_file(path, given):
            raise UserError(
                f"{label} {text}: is also one of this command's inputs; give a new file name"
            )
    if path.exists():
        found = kind_of_file(path)
        if found is not None and found != kind:
            raise UserError(
                f"{label} {text}: holds {found}, never replaced by {kind or 'this output'}; "
                "give a new file name (is the order of the arguments right?)"
            )
        if not force:
            raise UserError(f"{label} {text}: already exists; {to_replace}")
    check_output_folder(path.parent, label, make=False)
    existing = _nearest_existing(path.parent.absolute())
    # The temporary file's name is the final name plus a few characters.
    if len(os.fsencode(path.name)) + 16 > _name_max(existing):
        raise UserError(f"{label} {text}: the file name is too long for this system")
    return path


def check_distinct_outputs(outputs: Sequence[tuple[str, Path | None]]) -> None:
    """Two outputs of one command never name one file (the second write would replace the
    first): one UserError line naming both options."""
    seen: list[tuple[str, Path]] = []
    for label, path in outputs:
        if path is None:
            continue
        for other_label, other in seen:
            if _same_file(path, other):
                raise UserError(f"{label} {path}: is also {other_label}; give another file name")
        seen.append((label, path))


def open_output(path: Path, label: str) -> BinaryIO:
    """Open `path` to stream into (a log written while a server runs): a regular file or a new
    name only, never followed through a symlink, never a FIFO (which would block) or a device;
    else one UserError line. The file is emptied only once it is known to be a regular file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        refuse_special(path, label)  # a link or a FIFO with no reader: say which
        raise UserError(
            f"{label} {path}: cannot write there ({describe_write_error(exc)})"
        ) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
            raise UserError(f"{label} {path}: is {kind}, not a regular file; give a file name")
        os.set_blocking(fd, True)
        os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "wb")


def refuse_special(path: Path, label: str) -> None:
    """One UserError line when `path` is a symlink or exists as anything but a regular file."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return  # a new name (or one the write itself will explain)
    if stat.S_ISLNK(mode):
        raise UserError(f"{label} {path}: is a symbolic link; give the file itself or a new name")
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise UserError(f"{label} {path}: is {kind}, not a regular file; give a file name")


_KINDS = {
    stat.S_IFCHR: "a device",
    stat.S_IFBLK: "a device",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.absolute() == b.absolute()


def describe_write_error(exc: OSError) -> str:
    """A failed write in words: the reason the system gave."""
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    if exc.errno == errno.ENOSPC:
        reason = "the disk is full"
    return reason
