from __future__ import annotations

from pathlib import Path

import pytest

from sagemeter.errors import UserError
from sagemeter.questions import BUILTIN_DIR, Question, load_question_set
from sagemeter.questions.article40 import render
from sagemeter.questions.scoring import extract_last_number, score_reply


def test_article_40_file_is_the_generator_output_item_for_item() -> None:
    assert (BUILTIN_DIR / "article-40.json").read_text(encoding="utf-8") == render()


def test_article_40_has_the_article_families() -> None:
    question_set = load_question_set("article-40")
    families = [q.family for q in question_set.questions]
    assert families.count("multiplication") == 15
    assert families.count("a+b-c") == 15
    assert families.count("capitals") == 10
    for q in question_set.questions:
        if q.family == "multiplication":
            a, b = (int(x) for x in q.prompt.split("What is ")[1].split("?")[0].split(" × "))
            assert 10 <= a <= 99 and 10 <= b <= 99 and int(q.answer) == a * b
        if q.family == "a+b-c":
            expr = q.prompt.split("What is ")[1].split("?")[0]
            left, c = expr.split(" - ")
            a, b = left.split(" + ")
            assert int(q.answer) == int(a) + int(b) - int(c)


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ("2 + 2 = 4", "4"),
        ("470 + 238 - 983 = -275", "-275"),
        ("The answer is 4,042.", "4042"),
        ("608-558", "558"),
        ("−275", "-275"),
        ("no digits here", None),
        ("**1352**", "1352"),
    ],
)
def test_last_number_extraction(reply: str, value: str | None) -> None:
    got = extract_last_number(reply)
    assert (None if got is None else str(got)) == value


def test_strict_scoring_of_numbers_and_capitals() -> None:
    mul = Question(id="m", family="multiplication", prompt="?", answer="1352")
    assert score_reply(mul, "52 × 26 = 1352") == (True, "1352")
    assert score_reply(mul, "1352, or maybe 1362") == (False, "1362")
    assert score_reply(mul, "13520") == (False, "13520")
    assert score_reply(mul, "1352.5") == (False, "1352.5")
    assert score_reply(mul, "I cannot say") == (False, None)
    negative = Question(id="s", family="a+b-c", prompt="?", answer="-275")
    assert score_reply(negative, "= −275")[0]
    assert not score_reply(negative, "= 275")[0]
    capital = Question(
        id="c", family="capitals", prompt="?", answer="Canberra", pattern=r"\bCanberra\b"
    )
    assert score_reply(capital, "The capital of Australia is Canberra.") == (True, "Canberra")
    assert not score_reply(capital, "Sydney")[0]
    assert not score_reply(capital, "Canberrasaurus")[0]


def test_user_jsonl_question_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(
        '{"prompt": "1+1?", "answer": "2"}\n\n{"prompt": "Capital of Peru?", "answer": "Lima", "pattern": "Lima", "family": "geo"}\n'
    )
    question_set = load_question_set(str(path))
    assert question_set.name == "mine"
    assert [q.id for q in question_set.questions] == ["q0001", "q0002"]
    assert question_set.questions[1].family == "geo"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{bad\n", "line 1 is not valid JSON"),
        ('{"prompt": "x"}\n', "answer"),
        ("", "holds no questions"),
        (
            '{"id": "a", "prompt": "x", "answer": "1"}\n{"id": "a", "prompt": "y", "answer": "2"}\n',
            "not unique",
        ),
    ],
)
def test_bad_question_files(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(content)
    with pytest.raises(UserError, match=needle):
        load_question_set(str(path))


def test_unknown_question_set_names_the_built_ins() -> None:
    with pytest.raises(UserError, match="article-40"):
        load_question_set("nope")
