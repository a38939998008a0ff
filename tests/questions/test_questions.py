from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagemeter.errors import UserError
from sagemeter.questions import BUILTIN_DIR, Question, load_question_set
from sagemeter.questions.article40 import render
from sagemeter.questions.scoring import extract_last_number, score_reply
from tests.conftest import reference_file

ARTICLE_QUESTIONS = "run/article-40-questions.jsonl"
ARTICLE_RUNS = (
    "run/measure-gemma-4-e2b.json",
    "run/measure-gemma-4-e2b-qat.json",
    "run/measure-gemma-4-e2b-again.json",
)
FOUR_KEYS = ("id", "family", "prompt", "answer")


def _article_items() -> list[dict[str, str]]:
    lines = reference_file(ARTICLE_QUESTIONS).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_article_40_file_is_the_generator_output_item_for_item() -> None:
    assert (BUILTIN_DIR / "article-40.json").read_text(encoding="utf-8") == render()


def test_article_40_is_the_articles_own_questions_file_item_for_item() -> None:
    shipped = load_question_set("article-40").questions
    expected = _article_items()
    assert len(shipped) == len(expected) == 40
    for question, item in zip(shipped, expected, strict=True):
        assert {key: getattr(question, key) for key in FOUR_KEYS} == item


def test_article_40_prompts_ids_and_families_are_the_articles() -> None:
    questions = load_question_set("article-40").questions
    ids = [q.id for q in questions]
    assert ids[0] == "mul-0" and ids[14] == "mul-14" and ids[15] == "add-0"
    assert ids[30] == "cap-Australia" and ids[-1] == "cap-Vietnam"
    assert [q.family for q in questions] == ["mul"] * 15 + ["add"] * 15 + ["cap"] * 10
    assert questions[0].prompt == "What is 54 * 28? Reply with the number only."
    assert questions[0].answer == "1512"
    assert questions[15].prompt == "What is 360 + 875 - 688? Reply with the number only."
    assert questions[30].prompt == "What is the capital of Australia? Answer in one word."
    for q in questions:  # every answer recomputed from its own prompt
        expression = q.prompt.removeprefix("What is ").split("?")[0]
        if q.family == "mul":
            a, b = (int(x) for x in expression.split(" * "))
            assert 12 <= a <= 99 and 12 <= b <= 99 and q.answer == str(a * b)
        elif q.family == "add":
            left, c = expression.split(" - ")
            a, b = left.split(" + ")
            assert all(100 <= int(x) <= 999 for x in (a, b, c))
            assert q.answer == str(int(a) + int(b) - int(c))
        else:
            assert q.id == f"cap-{expression.removeprefix('the capital of ')}"


def test_article_40_answers_are_the_ones_the_article_recorded_for_its_table() -> None:
    """The five sums the article's table names are add-4, add-7, add-8, add-9 and add-14."""
    by_id = {q.id: q for q in load_question_set("article-40").questions}
    table = {
        "add-4": ("876 + 608 - 558", "926"),
        "add-7": ("257 + 388 - 290", "355"),
        "add-8": ("782 + 571 - 534", "819"),
        "add-9": ("470 + 238 - 983", "-275"),
        "add-14": ("150 + 937 - 139", "948"),
    }
    for item_id, (sum_text, answer) in table.items():
        assert sum_text in by_id[item_id].prompt and by_id[item_id].answer == answer
    for run in ARTICLE_RUNS:  # every run answered exactly these 40 ids
        answers = json.loads(reference_file(run).read_text())["quality"]["answers"]
        assert list(answers) == list(by_id)


def test_article_40_carries_its_provenance() -> None:
    provenance = load_question_set("article-40").provenance
    assert provenance is not None and provenance["seed"] == 20260925
    assert "compare.py" in provenance["repository"]


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
