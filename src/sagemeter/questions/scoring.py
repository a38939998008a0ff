r"""Two named scoring rules: our strict one (the default) and the source article's.

Every result records which rule scored it (`detail.quality.scoring`), and `combine` warns when two
files were scored differently. docs/statistics.md says where the two rules part.

**strict** (`score_reply`): one rule per answer kind, the same for every checkpoint.

The kind comes from the item: a `pattern` makes it a pattern item; otherwise the answer's own form
decides (`YYYY-MM-DD` a date, `HH:MM` a time, a plain decimal a number, anything else text).

- **number**: the *last* number in the reply is the answer (thousands separators and the Unicode
  minus accepted; a sign counts only when attached to the digits and not glued to a previous
  number, so `608-558` is not read as `-558` but `**-558**` is; `12 000` is two numbers). It must
  equal the expected value exactly (`12.0` is 12); any other number anywhere later in the reply
  makes it wrong. A hedged final number gets no credit: one preceded by a hedge word (`about`,
  `approximately`, `around`, `roughly`, `nearly`, `almost`, `maybe`, `perhaps`, `probably`,
  `possibly`, `likely`, `or`, ...), by `~`, `≈` or `±`, or closing a range (`12-13`, `12 to 13`,
  `between 12 and 13`).
- **date**: every date in the reply is found, whatever its form (`2024-03-05`, `2024-3-5`,
  `05/03/2024`, `2024/03/05`, `5 March 2024`, `March 5, 2024`, `2024-03-05T10:00`); the *last* one
  counts and must be written exactly `YYYY-MM-DD` and equal the expected date. A hedge word (or
  `between ... and`) just before it makes it wrong.
- **time**: every clock time (`14:30`, `9:05`, `14:30:00`, `2:30 pm`) is found; the *last* one
  counts and must be written exactly `HH:MM` (24-hour, two-digit hour, no seconds, no am/pm) and
  equal the expected time. A hedge word (or `between ... and`) just before it makes it wrong.
- **pattern**: the item's regular expression must match somewhere in the reply (case-insensitive
  unless the pattern says otherwise). Built-in word items make the last word of their closed class
  count: the answer must appear with no other member of the class after it.
- **text**: the whole reply, stripped of spaces and a final full stop, must equal the answer
  (case-insensitive).

**article** (`score_article`): the article's `compare.py` rule, a regular expression searched
anywhere in the reply: the expected number as a whole word (`\bN\b` for its products; for every
other number `(?<![\d-])N\b`, so 275 is not read inside -275), or the expected word as a whole
word, case-insensitively, an accented letter also matching its plain form (`Bras[íi]lia`). Any
match credits the reply, whatever else it says; an item's strict `pattern` plays no part.
"""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal, InvalidOperation
from typing import Literal, get_args

from sagemeter.questions import Question

AnswerKind = Literal["pattern", "date", "time", "number", "text"]
ScoringRule = Literal["strict", "article"]
SCORING_RULES: tuple[ScoringRule, ...] = get_args(ScoringRule)
ARTICLE_PRODUCT_FAMILY = "mul"  # the article matched its products with \b on both sides

_NUMBER = re.compile(
    r"(?:(?<=^)|(?<=[\s=(:*_`'\"\[]))(?P<sign>[-−])?(?P<body>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?"
    r"|(?P<bare>\d{1,3}(?:,\d{3})+|\d+)(?P<bare_frac>\.\d+)?"
)
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_HH_MM = re.compile(r"\d{2}:\d{2}")
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_DATE_LIKE = re.compile(
    r"(?<![\w/.-])(?:"
    r"\d{4}-\d{1,2}-\d{1,2}(?:T\d{1,2}:\d{2}(?::\d{2})?)?"
    r"|\d{1,4}[/.]\d{1,2}[/.]\d{1,4}"
    rf"|{_DAY}\s+(?:of\s+)?{_MONTH}\.?,?\s+\d{{4}}"
    rf"|{_MONTH}\.?\s+{_DAY},?\s+\d{{4}}"
    r")(?![\w/-]|\.\d)",
    re.IGNORECASE,
)
_TIME_LIKE = re.compile(
    r"(?<![\d:.])\d{1,2}:\d{2}(?::\d{2})?(?:\s*(?:[ap]\.m\.|[ap]m\b))?(?![\d:])", re.IGNORECASE
)
# Words and signs that, just before the final answer, say the reply does not commit to it.
_HEDGE_BEFORE = re.compile(
    r"(?:\b(?:about|approximately|approx|around|roughly|nearly|almost|circa|ca|or|maybe|perhaps"
    r"|possibly|probably|likely|estimated|close\s+to)\b\W*|[~≈±][\s*_`'\"]*"
    r"|\bbetween\s+\S+\s+and\b[\s*_`'\"]*)$",
    re.IGNORECASE,
)
# A final number that closes a range: "12-13", "12 – 13", "12 to 13". Not for dates and times,
# where "from 09:00 to 10:30" is how the question itself is put.
_RANGE_BEFORE = re.compile(r"\d\s*(?:[-–—]|\bto\b)[\s*_`'\"]*$", re.IGNORECASE)
_LOOKBACK = 60  # characters before the final answer searched for a hedge


def answer_kind(question: Question) -> AnswerKind:
    """Which rule scores this item; the same item always gets the same rule."""
    if question.pattern is not None:
        return "pattern"
    answer = question.answer.strip()
    if _ISO_DATE.fullmatch(answer):
        return "date"
    if _HH_MM.fullmatch(answer):
        return "time"
    if is_numeric_answer(answer):
        return "number"
    return "text"


def _last_number_match(reply: str) -> tuple[Decimal, int] | None:
    """The last number in `reply` and where it starts (its sign included)."""
    found: tuple[Decimal, int] | None = None
    for match in _NUMBER.finditer(reply):
        if match["body"] is not None:
            text = ("-" if match["sign"] else "") + match["body"] + (match["frac"] or "")
        else:
            text = match["bare"] + (match["bare_frac"] or "")
        try:
            found = (Decimal(text.replace(",", "")), match.start())
        except InvalidOperation:
            continue
    return found


def extract_last_number(reply: str) -> Decimal | None:
    """The last number in `reply` as a Decimal, or None when it holds none."""
    found = _last_number_match(reply)
    return None if found is None else found[0]


def is_hedged(reply: str, start: int, *, ranges: bool = False) -> bool:
    """Whether the answer starting at `start` follows a hedge (or, with `ranges`, ends a range)."""
    before = reply[max(0, start - _LOOKBACK) : start]
    if _HEDGE_BEFORE.search(before):
        return True
    return ranges and _RANGE_BEFORE.search(before) is not None


def is_numeric_answer(answer: str) -> bool:
    return re.fullmatch(r"-?\d+(\.\d+)?", answer.strip()) is not None


def _last_match(pattern: re.Pattern[str], reply: str) -> re.Match[str] | None:
    last = None
    for last in pattern.finditer(reply):  # noqa: B007 - the loop keeps the last one
        pass
    return last


def _score_number(answer: str, reply: str) -> tuple[bool, str | None]:
    found = _last_number_match(reply)
    if found is None:
        return False, None
    value, start = found
    extracted = str(int(value)) if value == value.to_integral() else str(value)
    if is_hedged(reply, start, ranges=True):
        return False, extracted
    return value == Decimal(answer), extracted


def _score_form(
    pattern: re.Pattern[str], exact: re.Pattern[str], answer: str, reply: str
) -> tuple[bool, str | None]:
    """Dates and times: the last one in any form counts; only the asked form can be right."""
    match = _last_match(pattern, reply)
    if match is None:
        return False, None
    extracted = match.group(0)
    if is_hedged(reply, match.start()):
        return False, extracted
    return exact.fullmatch(extracted) is not None and extracted == answer, extracted


def score_reply(question: Question, reply: str) -> tuple[bool, str | None]:
    """(correct, what was extracted). The extracted text is kept in the result for review."""
    if question.pattern is not None:
        match = re.search(question.pattern, reply, flags=re.IGNORECASE)
        return match is not None, match.group(0) if match else None
    kind = answer_kind(question)
    answer = question.answer.strip()
    if kind == "date":
        return _score_form(_DATE_LIKE, _ISO_DATE, answer, reply)
    if kind == "time":
        return _score_form(_TIME_LIKE, _HH_MM, answer, reply)
    if kind == "number":
        return _score_number(answer, reply)
    stripped = reply.strip().rstrip(".").strip()
    return stripped.casefold() == question.answer.casefold(), stripped or None


def score(question: Question, reply: str, rule: ScoringRule = "strict") -> tuple[bool, str | None]:
    """(correct, what was extracted) by the named rule."""
    if rule == "article":
        return score_article(question, reply)
    return score_reply(question, reply)


def article_pattern(question: Question) -> str:
    """The regular expression the article's rule searches for this item."""
    answer = question.answer.strip()
    if is_numeric_answer(answer):
        before = r"\b" if question.family == ARTICLE_PRODUCT_FAMILY else r"(?<![\d-])"
        return rf"{before}{re.escape(answer)}\b"
    return rf"(?i)\b{_accent_tolerant(answer)}\b"


def _accent_tolerant(word: str) -> str:
    """`word` escaped for a pattern, each accented letter also matching its plain letter."""
    parts = []
    for char in word:
        plain = unicodedata.normalize("NFD", char)[0]
        parts.append(f"[{char}{plain}]" if plain != char else re.escape(char))
    return "".join(parts)


def score_article(question: Question, reply: str) -> tuple[bool, str | None]:
    """The article's rule: its pattern found anywhere in the reply credits it."""
    match = re.search(article_pattern(question), reply)
    return match is not None, match.group(0) if match else None
