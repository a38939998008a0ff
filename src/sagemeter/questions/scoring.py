"""The strict scorer: one rule per answer kind, the same for every checkpoint.

Numeric answers: the *last* number in the reply is the answer (thousands separators and the
Unicode minus accepted; a sign counts only when attached to the digits and not glued to a previous
number, so `608-558` is not read as `-558`). It must equal the expected value exactly; any other
number anywhere later in the reply makes it wrong. Text answers: the item's regular expression
must match the reply (case-insensitive).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from sagemeter.questions import Question

_NUMBER = re.compile(
    r"(?:(?<=^)|(?<=[\s=(:]))(?P<sign>[-−])?(?P<body>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?"
    r"|(?P<bare>\d{1,3}(?:,\d{3})+|\d+)(?P<bare_frac>\.\d+)?"
)


def extract_last_number(reply: str) -> Decimal | None:
    """The last number in `reply` as a Decimal, or None when it holds none."""
    value: Decimal | None = None
    for match in _NUMBER.finditer(reply):
        if match["body"] is not None:
            text = ("-" if match["sign"] else "") + match["body"] + (match["frac"] or "")
        else:
            text = match["bare"] + (match["bare_frac"] or "")
        try:
            value = Decimal(text.replace(",", ""))
        except InvalidOperation:
            continue
    return value


def is_numeric_answer(answer: str) -> bool:
    return re.fullmatch(r"-?\d+(\.\d+)?", answer.strip()) is not None


def score_reply(question: Question, reply: str) -> tuple[bool, str | None]:
    """(correct, what was extracted). The extracted text is kept in the result for review."""
    if question.pattern is not None:
        match = re.search(question.pattern, reply, flags=re.IGNORECASE)
        return match is not None, match.group(0) if match else None
    if is_numeric_answer(question.answer):
        value = extract_last_number(reply)
        if value is None:
            return False, None
        extracted = str(int(value)) if value == value.to_integral() else str(value)
        return value == Decimal(question.answer.strip()), extracted
    stripped = reply.strip().rstrip(".").strip()
    return stripped.casefold() == question.answer.casefold(), stripped or None
