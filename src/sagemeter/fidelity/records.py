"""The fidelity record: one endpoint's next-token distributions along one answer per prompt.

A record made without a reference holds the endpoint's own greedy answers; a record made with a
reference holds the same endpoint's distributions forced along the reference's answer tokens, so
two records line up position by position. Top-k entries are stored as `[id, text, logprob]`
triples to keep the file small.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from sagemeter.atomic import write_text_atomic
from sagemeter.errors import UserError
from sagemeter.results.fidelity_record import SCHEMA, FidelityRecord
from sagemeter.textfiles import read_json

# FidelityRecord is read from here too: its model lives with the result schema.
__all__ = ["SCHEMA", "FidelityRecord", "load_record", "save_record"]


def save_record(path: Path, record: FidelityRecord) -> None:
    """Write a record atomically: a reader sees the old file, no file, or the whole new one."""
    write_text_atomic(path, record.model_dump_json(by_alias=True, indent=1) + "\n")


def load_record(path: Path) -> FidelityRecord:
    """Read a record, or raise UserError naming the file and what is wrong with it."""
    payload = read_json(path)
    if not isinstance(payload, dict) or payload.get("schema") != SCHEMA:
        raise UserError(f"{path}: not a fidelity record (expected schema {SCHEMA!r})")
    try:
        return FidelityRecord.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise UserError(f"{path}: bad fidelity record at {where}: {first['msg']}") from None
