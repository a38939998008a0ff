"""The strict scorer against replies built to trick it: a wrong or hedged answer never scores."""

from __future__ import annotations

import pytest

from sagemeter.questions import Question, load_question_set
from sagemeter.questions.scoring import answer_kind, score_reply


def item(answer: str, pattern: str | None = None) -> Question:
    return Question(id="x", family="f", prompt="?", answer=answer, pattern=pattern)


def bank_item(family: str, answer: str) -> Question:
    """A real bank item with this answer, so the shipped patterns are what is tested."""
    for q in load_question_set("bank-1000").questions:
        if q.family == family and q.answer == answer:
            return q
    raise AssertionError(f"no {family} item answers {answer}")


def test_the_rule_follows_the_answer_form() -> None:
    assert answer_kind(item("2024-03-05")) == "date"
    assert answer_kind(item("09:05")) == "time"
    assert answer_kind(item("-12")) == "number"
    assert answer_kind(item("12.5")) == "number"
    assert answer_kind(item("Paris")) == "text"
    assert answer_kind(item("12", pattern=r"\b12\b")) == "pattern"


@pytest.mark.parametrize(
    ("reply", "extracted"),
    [
        ("12", "12"),
        ("The answer is 12.", "12"),
        ("**12**", "12"),
        ("5 + 7 = 12", "12"),
        ("12 apples", "12"),
        ("12.0", "12"),
        ("Adding 5 to 7 gives 12", "12"),
        ("The total comes to 12", "12"),
        ("It is 12, for sure.", "12"),
    ],
)
def test_numbers_credited(reply: str, extracted: str) -> None:
    assert score_reply(item("12"), reply) == (True, extracted)


@pytest.mark.parametrize(
    ("reply", "extracted"),
    [
        # a number written after the answer is the answer
        ("12. Check: 7 + 5", "5"),
        ("12 (step 2 of 3)", "3"),
        ("12\n\nNote: 5 × 7 = 35", "35"),
        # hedges and alternatives
        ("about 12", "12"),
        ("Approximately 12.", "12"),
        ("roughly **12**", "12"),
        ("maybe 12", "12"),
        ("around 12", "12"),
        ("~12", "12"),
        ("≈ 12", "12"),
        ("13 or 12", "12"),
        ("It is probably 12", "12"),
        # ranges ending in the answer
        ("11-12", "12"),
        ("11 – 12", "12"),
        ("11 to 12", "12"),
        ("between 11 and 12", "12"),
        # near misses and other forms
        ("120", "120"),
        ("1.2", "1.2"),
        ("12.5", "12.5"),
        ("-12", "-12"),
        ("1,2", "2"),
        ("twelve", None),
        ("", None),
    ],
)
def test_numbers_refused(reply: str, extracted: str | None) -> None:
    assert score_reply(item("12"), reply) == (False, extracted)


def test_an_alternative_after_the_answer_is_wrong_too() -> None:
    assert score_reply(item("13"), "12 or 13") == (False, "13")
    assert score_reply(item("13"), "12 or maybe 13") == (False, "13")


def test_negative_numbers_need_an_attached_sign() -> None:
    negative = item("-275")
    for reply in ("-275", "−275", "= -275", "**-275**", "(-275)", "3 - 5 gives -275"):
        assert score_reply(negative, reply) == (True, "-275"), reply
    for reply in ("275", "- 275", "608-275"):
        assert not score_reply(negative, reply)[0], reply


def test_thousands_separators_only_in_groups_of_three() -> None:
    assert score_reply(item("12000"), "12,000") == (True, "12000")
    assert not score_reply(item("12000"), "12 000")[0]
    assert not score_reply(item("12000"), "12.000")[0]


def test_wrong_numbers_reasoning_gym_gives_partial_credit_get_none() -> None:
    # reasoning-gym 0.1.25 `products` scores each of these 0.36-0.83 against 79420.
    for reply in ("794200", "179420", "-79420", "79420 or 79421"):
        assert not score_reply(item("79420"), reply)[0], reply


@pytest.mark.parametrize(
    "reply",
    [
        "2024-03-05",
        "The date is 2024-03-05.",
        "**2024-03-05**",
        "45 days after 2024-01-20 is 2024-03-05",
        "2024-03-06, sorry: 2024-03-05",
        "2024-03-05 10:00",
    ],
)
def test_dates_credited(reply: str) -> None:
    assert score_reply(item("2024-03-05"), reply) == (True, "2024-03-05")


@pytest.mark.parametrize(
    ("reply", "extracted"),
    [
        ("2024-3-5", "2024-3-5"),
        ("05/03/2024", "05/03/2024"),
        ("03/05/2024", "03/05/2024"),
        ("2024/03/05", "2024/03/05"),
        ("05.03.2024", "05.03.2024"),
        ("5 March 2024", "5 March 2024"),
        ("March 5, 2024", "March 5, 2024"),
        ("5th of March 2024", "5th of March 2024"),
        ("2024-03-05T00:00", "2024-03-05T00:00"),
        ("2024-03-05, that is March 5, 2024", "March 5, 2024"),
        ("2024-03-05 or 2024-03-06", "2024-03-06"),
        ("2024-03-06", "2024-03-06"),
        ("2023-03-05", "2023-03-05"),
        ("about 2024-03-05", "2024-03-05"),
        ("between 2024-03-04 and 2024-03-05", "2024-03-05"),
        ("20240305", None),
        ("in March", None),
    ],
)
def test_dates_refused(reply: str, extracted: str | None) -> None:
    assert score_reply(item("2024-03-05"), reply) == (False, extracted)


@pytest.mark.parametrize(
    "reply",
    [
        "09:05",
        "It will be 09:05.",
        "**09:05**",
        "It goes from 07:50 to 09:05",
        "21:35 plus 688 minutes is 09:03... no, 09:05",
        "09:05 (545 minutes after midnight)",
    ],
)
def test_times_credited(reply: str) -> None:
    assert score_reply(item("09:05"), reply) == (True, "09:05")


@pytest.mark.parametrize(
    ("reply", "extracted"),
    [
        ("9:05", "9:05"),
        ("09:05:00", "09:05:00"),
        ("9:05 am", "9:05 am"),
        ("09:05 AM", "09:05 AM"),
        ("09:05a.m.", "09:05a.m."),
        ("09:05 or 09:06", "09:06"),
        ("around 09:05", "09:05"),
        ("09:06", "09:06"),
        ("21:05", "21:05"),
        ("09.05", None),
        ("0905", None),
    ],
)
def test_times_refused(reply: str, extracted: str | None) -> None:
    assert score_reply(item("09:05"), reply) == (False, extracted)


def test_weekday_pattern_takes_the_last_weekday_named() -> None:
    friday = bank_item("weekday", "Friday")
    for reply in ("Friday", "It is a Friday.", "friday", "Thursday? No: Friday."):
        assert score_reply(friday, reply)[0], reply
    for reply in ("Thursday", "Friday or Saturday", "Friday, not Sunday", "Fri", "Fridays"):
        assert not score_reply(friday, reply)[0], reply


def test_chemical_symbols_are_case_sensitive() -> None:
    iron = bank_item("chemical-symbols", "Fe")
    for reply in ("Fe", "The symbol is Fe.", "Fe (iron)", "Not Cu but Fe"):
        assert score_reply(iron, reply)[0], reply
    for reply in ("FE", "fe", "F", "Fe or Co", "Fer"):
        assert not score_reply(iron, reply)[0], reply


def test_capitals_refuse_a_second_capital_after_the_answer() -> None:
    canberra = bank_item("capitals", "Canberra")
    assert score_reply(canberra, "The capital of Australia is Canberra, not Sydney.")[0]
    for reply in ("Sydney", "Canberra or Wellington", "Canberrasaurus"):
        assert not score_reply(canberra, reply)[0], reply
