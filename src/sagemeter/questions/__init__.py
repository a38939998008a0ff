"""Question sets with exact answers, and the one strict scorer used for every checkpoint.

Built-in sets are JSON files beside this module, `{"name", "provenance" or "seed", "questions":
[...]}`, each regenerated from a fixed seed by its own module and checked by a test: `article-40`
(the source article's own 40, word for word, `article40.py`) and `bank-1000` (20 families of 50,
`bank.py`).

A user set is a JSONL file, one item per line (blank lines skipped):

    {"prompt": "What is 17 × 23? Reply with the number only.", "answer": "391"}
    {"id": "d1", "family": "dates", "prompt": "...", "answer": "2024-03-05"}
    {"family": "geo", "prompt": "Capital of Peru?", "answer": "Lima", "pattern": "Lima"}

`prompt` and `answer` are required. `family` defaults to `default`; `id` defaults to `q0001`,
`q0002`, ... by position and must be unique; `pattern` (a regular expression that must compile,
searched case-insensitively) makes the item a pattern item. Without a pattern the answer's form
picks the scoring rule (see `scoring.py`): `YYYY-MM-DD` a date, `HH:MM` a time, a plain decimal a
number, anything else the whole reply compared as text.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from sagemeter.errors import UserError
from sagemeter.textfiles import QUESTIONS_CAP, decode_utf8, read_capped

BUILTIN_DIR = Path(__file__).parent


class Question(BaseModel):
    id: str
    family: str
    prompt: str
    answer: str
    pattern: str | None = None  # a regular expression the reply must match, for text answers


class QuestionSet(BaseModel):
    name: str
    sha256: str
    questions: list[Question]
    provenance: dict[str, Any] | None = None  # where a built-in set comes from


def provenance_of(payload: dict[str, Any]) -> dict[str, Any] | None:
    """A built-in file's own provenance, or its seed when that is all it records."""
    if isinstance(found := payload.get("provenance"), dict):
        return found
    return {"seed": payload["seed"]} if "seed" in payload else None


def builtin_sets() -> list[str]:
    return sorted(path.stem for path in BUILTIN_DIR.glob("*.json"))


def family_counts(question_set: QuestionSet) -> dict[str, int]:
    """Items per family, in the order families first appear (the order results list them)."""
    counts: dict[str, int] = {}
    for question in question_set.questions:
        counts[question.family] = counts.get(question.family, 0) + 1
    return counts


def load_question_set(spec: str) -> QuestionSet:
    """A built-in set by name (e.g. `article-40`) or a user JSONL file by path."""
    builtin = BUILTIN_DIR / f"{spec}.json"
    if spec in builtin_sets():
        raw = builtin.read_bytes()
        try:
            payload = json.loads(raw)
            items = payload["questions"]
        except (ValueError, KeyError, TypeError) as exc:
            raise UserError(f"built-in question set {spec!r} is damaged: {exc}") from None
        question_set = _validated(spec, raw, items)
        return question_set.model_copy(update={"provenance": provenance_of(payload)})
    path = Path(spec).expanduser()
    if not path.is_file():
        raise UserError(
            f"question set {spec!r} is neither built in ({', '.join(builtin_sets())}) nor a file"
        )
    raw = read_capped(path, QUESTIONS_CAP)
    items = []
    for number, line in enumerate(decode_utf8(path, raw).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except (ValueError, RecursionError):
            raise UserError(f"{path}: line {number} is not valid JSON") from None
    return _validated(path.stem, raw, items, label=str(path))


def _validated(name: str, raw: bytes, items: list[object], label: str = "") -> QuestionSet:
    """The set's questions checked; a problem names the file (`label`) or the built-in set."""
    where = label or f"question set {name}"
    questions = []
    for index, item in enumerate(items, start=1):
        if isinstance(item, dict) and "id" not in item:
            item = {**item, "id": f"q{index:04d}"}
        if isinstance(item, dict) and "family" not in item:
            item = {**item, "family": "default"}
        try:
            question = Question.model_validate(item)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(part) for part in first["loc"])
            raise UserError(f"{where}: item {index}: {field}: {first['msg']}") from None
        if question.pattern is not None:
            try:  # a broken pattern must fail here, not halfway through a measurement
                re.compile(question.pattern)
            except re.error as exc:
                raise UserError(f"{where}: item {index}: pattern: {exc}") from None
        questions.append(question)
    if not questions:
        raise UserError(f"{where}: holds no questions")
    ids = [question.id for question in questions]
    if len(set(ids)) != len(ids):
        raise UserError(f"{where}: question ids are not unique")
    return QuestionSet(name=name, sha256=hashlib.sha256(raw).hexdigest(), questions=questions)
