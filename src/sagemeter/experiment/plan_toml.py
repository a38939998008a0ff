"""A plan written back as TOML, so a built-in plan (the demo's) can be read, edited and rerun
with `sagemeter run plan.toml` like a plan of one's own.

Only what a plan holds is written: strings, whole and decimal numbers, booleans, lists of them,
tables and the `[[arm]]` array of tables. Strings are written as JSON writes them, which is a
valid TOML basic string.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    raise TypeError(f"a plan holds no {type(value).__name__} values")


def _table(data: Mapping[str, Any], path: str, header: str) -> list[str]:
    """`data`'s plain keys under `header`, then its tables and arrays of tables."""
    lines = [header] if header else []
    plain = {k: v for k, v in data.items() if not _nested(v)}
    lines += [f"{key} = {_value(value)}" for key, value in plain.items()]
    for key, value in data.items():
        if isinstance(value, Mapping):
            lines += ["", *_table(value, f"{path}{key}.", f"[{path}{key}]")]
        elif _nested(value):
            for item in value:
                lines += ["", *_table(item, f"{path}{key}.", f"[[{path}{key}]]")]
    return lines


def _nested(value: Any) -> bool:
    return isinstance(value, Mapping) or (
        isinstance(value, list) and bool(value) and all(isinstance(i, Mapping) for i in value)
    )


def plan_toml(data: Mapping[str, Any], comment: str = "") -> str:
    """The TOML text of plan data (`Plan.to_data()`), with `comment` lines on top."""
    top = [f"# {line}" if line else "#" for line in comment.splitlines()]
    return "\n".join([*top, *_table(data, "", "")]) + "\n"
