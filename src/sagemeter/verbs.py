"""Small pieces of the verbs that both faces need: input checks, settings, the checkpoint list.

The CLI and the MCP server differ only in how a parameter is spelled (`--long-tokens` against
`long_tokens`), so messages take a `label` that turns a settings field into the face's spelling.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from sagemeter.errors import UserError
from sagemeter.settings import METHODS, MeasureSettings, quick_settings, with_method

Label = Callable[[str], str]


CLI_NAMES = {
    "load_levels": "--levels",
    "decode_repeats": "--repeats",
    "load_batches": "--batches",
    "load_max_tokens": "--load-tokens",
    "fidelity_prompts": "--fidelity",
    "margin_points": "--margin",
    "timeout_s": "--timeout",
    "stall_s": "--stall",
    "batch_reruns": "--reruns",
}


def cli_flag(field: str) -> str:
    """A settings field as the CLI spells it: `long_tokens` → `--long-tokens`."""
    return CLI_NAMES.get(field, "--" + field.replace("_", "-"))


RESULT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$")
MAX_CONCURRENCY = 1024  # requests at once in one level or one load run (file descriptors, RAM)


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


def check_price(value: float | None, label: str = "--price-per-hour") -> None:
    """A price is a positive, finite number of USD (inf and nan are refused too)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UserError(f"{label} {value!r}: give a positive number of USD, e.g. 1.1267")


def check_levels(levels: list[int], label: str = "--levels") -> None:
    """Requests at once: whole numbers from 1 to MAX_CONCURRENCY."""
    for level in levels:
        if not 1 <= level <= MAX_CONCURRENCY:
            raise UserError(f"{label}: {level} requests at once is outside 1–{MAX_CONCURRENCY}")


def measure_settings(
    quick: bool,
    overrides: Mapping[str, Any],
    *,
    method: str | None = None,
    label: Label = cli_flag,
) -> MeasureSettings:
    """The default settings (or the quick ones), measured by `method` (ours when None), with the
    given fields changed, validated.

    `overrides` maps MeasureSettings fields to values; None means "keep the default".
    """
    base = quick_settings() if quick else MeasureSettings()
    if method is not None and method != base.method:
        chosen = next((known for known in METHODS if known == method), None)
        if chosen is None:
            raise UserError(f"{label('method')} {method!r}: give one of {', '.join(METHODS)}")
        base = with_method(base, chosen)
    return settings_with(base, overrides, label=label)


def settings_with(
    base: MeasureSettings, overrides: Mapping[str, Any], *, label: Label = cli_flag
) -> MeasureSettings:
    """`base` with the given fields changed (None keeps the base value), validated."""
    changes = {key: value for key, value in overrides.items() if value is not None}
    try:
        settings = MeasureSettings.model_validate({**base.model_dump(), **changes})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UserError(f"{label(str(first['loc'][0]))}: {first['msg']}") from None
    if settings.long_tokens <= settings.short_tokens:
        raise UserError(f"{label('long_tokens')} must be larger than {label('short_tokens')}")
    check_levels(settings.load_levels, label("load_levels"))
    return settings


class CheckpointRow(BaseModel):
    """One embedded-engine checkpoint as `sagemeter checkpoints` lists it."""

    name: str
    storage: str
    description: str
    available: bool = Field(description="the GGUF file exists now (the 32-bit one is derived)")
    path: str
    size_mib: float | None = None
    bits_per_weight: float | None = None
    parameters: int | None = None
    note: str | None = None


def checkpoint_rows() -> list[CheckpointRow]:
    """Every named checkpoint, with size and bits per weight read from the file when it exists."""
    from sagemeter.checkpoints import CHECKPOINT_NAMES, gguf_summary, resolve_checkpoint

    rows = []
    for name in CHECKPOINT_NAMES:
        checkpoint = resolve_checkpoint(name, derive=False)
        row = CheckpointRow(
            name=name,
            storage=checkpoint.storage,
            description=checkpoint.description,
            available=checkpoint.path.is_file(),
            path=str(checkpoint.path),
        )
        if row.available:
            summary = gguf_summary(checkpoint.path)
            row.size_mib = round(checkpoint.size_bytes / 2**20, 1)
            row.bits_per_weight = summary["bits_per_weight"]
            row.parameters = summary["parameters"]
        else:
            row.note = "derived on first use"
        rows.append(row)
    return rows
