"""Load result files: written atomically, read back with one clear line when they do not fit."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from sagemeter.atomic import write_text_atomic
from sagemeter.errors import UserError
from sagemeter.loadgen.result import RESULT_KIND, LoadResult
from sagemeter.textfiles import read_json


def write_result(path: Path, result: LoadResult) -> None:
    """The whole file or none: a temp file beside it, then a rename."""
    write_text_atomic(path, result.model_dump_json(indent=1) + "\n")


def load_result(path: Path) -> LoadResult:
    """A `sagemeter load` result file, or a UserError naming the file and what is wrong."""
    payload = read_json(path)  # capped, a FIFO refused, NaN and Infinity refused
    try:
        result = LoadResult.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise UserError(f"{path}: not a load result ({where}: {first['msg']})") from None
    if result.kind != RESULT_KIND:
        raise UserError(f"{path}: result kind {result.kind!r}, expected {RESULT_KIND!r}")
    return result
