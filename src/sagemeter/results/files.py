"""Result files: where a result goes, its name rule, and writing and reading it.

Reading takes sagemeter's own files (schema 2, and 1 through `results.v1`), the article's
minimal seven-key files, and the article's own full result shape (`results.article`).
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import ValidationError

from sagemeter.atomic import write_text_atomic
from sagemeter.errors import UserError
from sagemeter.results.article import is_article_shape, read_article_result
from sagemeter.results.derived import fill_derived
from sagemeter.results.model import MeasureResult
from sagemeter.textfiles import read_json

RESULT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$")


def check_result_name(name: str, *, label: str = "--name") -> None:
    """A result name becomes part of a file name: letters, digits, dots, dashes, underscores, at
    most 100 characters, not starting with a dot (no separators, no hidden files, no control
    characters, nothing a filesystem refuses)."""
    if not RESULT_NAME.match(name):
        shown = name if len(name) <= 40 else name[:40] + "…"
        raise UserError(
            f"{label} {shown!r}: use 1–100 letters, digits, dots, dashes or underscores "
            "(not starting with a dot)"
        )


def result_path(out_dir: Path, name: str) -> Path:
    return out_dir / f"measure-{name}.json"


def save_result(result: MeasureResult, path: Path) -> None:
    """Write atomically: a reader sees the old file, no file, or the whole new one. The result's
    summaries (`results.derived`) are filled first, so every file written carries them."""
    text = fill_derived(result).model_dump_json(indent=2)
    write_text_atomic(path, text + "\n")


def load_result(path: Path) -> MeasureResult:
    """Read and validate one result file; any problem becomes one UserError naming the file.

    Reads sagemeter's own files, the article's minimal ones, and the article's own full result
    shape (`sagemeter.results.article`).
    """
    payload = read_json(path)
    if not isinstance(payload, dict):
        raise UserError(f"{path}: expected a JSON object with measurement keys")

    if is_article_shape(payload):
        return fill_derived(read_article_result(path, payload))
    if "decode_tokens_per_second" not in payload and "load_tokens_per_second" not in payload:
        raise UserError(
            f"{path}: not a sagemeter result (no decode_tokens_per_second or "
            "load_tokens_per_second key)"
        )
    try:
        result = MeasureResult.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise UserError(f"{path}: {where}: {first['msg']}") from None
    if result.quality is not None:
        _check_quality(path, result.quality)
    if result.name is None:
        result.name = path.stem.removeprefix("measure-")
    return fill_derived(result)


def _check_quality(path: Path, quality: str) -> None:
    correct, sep, total = quality.partition("/")
    if not (sep and correct.strip().isdigit() and total.strip().isdigit()):
        raise UserError(f"{path}: quality {quality!r} is not of the form 'correct/total'")
    if int(correct) > int(total):
        raise UserError(f"{path}: quality {quality!r} has more correct answers than questions")
