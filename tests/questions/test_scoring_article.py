"""The article's scoring rule beside our strict one: the article's verdicts on its own 120
answers, and every way the two rules part (docs/statistics.md lists the same cases)."""

from __future__ import annotations

import json

import pytest

from sagemeter.questions import Question, load_question_set
from sagemeter.questions.scoring import SCORING_RULES, ScoringRule, article_pattern, score
from tests.conftest import reference_file

RUNS = {
    "bf16": "run/measure-gemma-4-e2b.json",
    "qat": "run/measure-gemma-4-e2b-qat.json",
    "bf16 again": "run/measure-gemma-4-e2b-again.json",
}
# The article's table: which sums each checkpoint missed (the same three for both bf16 runs).
ARTICLE_MISSES = {
    "bf16": {"add-4", "add-8", "add-14"},
    "qat": {"add-7", "add-9", "add-14"},
    "bf16 again": {"add-4", "add-8", "add-14"},
}


def _questions() -> dict[str, Question]:
    return {q.id: q for q in load_question_set("article-40").questions}


def _recorded(run: str) -> dict[str, object]:
    payload = json.loads(reference_file(RUNS[run]).read_text(encoding="utf-8"))
    quality = payload["quality"]
    assert isinstance(quality, dict)
    return quality


@pytest.mark.parametrize("rule", SCORING_RULES)
@pytest.mark.parametrize("run", list(RUNS))
def test_each_rule_gives_the_articles_verdicts_on_its_recorded_answers(
    run: str, rule: ScoringRule
) -> None:
    questions = _questions()
    recorded = _recorded(run)
    answers = recorded["answers"]
    assert isinstance(answers, dict) and len(answers) == 40
    verdicts = {qid: score(questions[qid], reply, rule)[0] for qid, reply in answers.items()}
    misses = {qid for qid, correct in verdicts.items() if not correct}
    assert misses == ARTICLE_MISSES[run]
    assert sum(verdicts.values()) == recorded["correct"] == 37
    by_family: dict[str, dict[str, int]] = {}
    for qid, correct in verdicts.items():
        counts = by_family.setdefault(questions[qid].family, {"correct": 0, "total": 0})
        counts["total"] += 1
        counts["correct"] += int(correct)
    assert by_family == recorded["by_kind"]


def test_the_two_rules_agree_on_all_120_recorded_answers() -> None:
    questions = _questions()
    compared = 0
    for run in RUNS:
        answers = _recorded(run)["answers"]
        assert isinstance(answers, dict)
        for qid, reply in answers.items():
            strict = score(questions[qid], reply, "strict")
            article = score(questions[qid], reply, "article")
            assert strict[0] == article[0], (run, qid, reply)
            compared += 1
    assert compared == 120


def test_the_article_rule_is_its_regular_expressions() -> None:
    questions = _questions()
    assert article_pattern(questions["mul-0"]) == r"\b1512\b"
    assert article_pattern(questions["add-9"]) == r"(?<![\d-])\-275\b"
    assert article_pattern(questions["cap-Brazil"]) == r"(?i)\bBras[íi]lia\b"
    assert article_pattern(questions["cap-New Zealand"]) == r"(?i)\bWellington\b"


@pytest.mark.parametrize(
    ("item_id", "reply", "strict", "article"),
    [
        # the same verdict
        ("mul-0", "54 * 28 = 1512", True, True),
        ("mul-0", "**1512**", True, True),
        ("mul-0", "15120", False, False),
        ("add-9", "470 + 238 - 983 = -275", True, True),
        ("add-9", "275", False, False),
        ("cap-Australia", "The capital of Australia is Canberra.", True, True),
        ("cap-Brazil", "Brasilia", True, True),
        ("cap-Australia", "Sydney", False, False),
        # the article credits the right number anywhere; strict reads the last and its hedges
        ("mul-0", "1512 or 1513", False, True),
        ("mul-0", "about 1512", False, True),
        ("mul-0", "1512. Check: 28 * 54", False, True),
        ("add-4", "926? No: 1026", False, True),
        ("mul-0", "-1512", False, True),
        ("cap-Australia", "Canberra. No wait, Ottawa", False, True),
        # strict reads forms the article's patterns do not
        ("mul-0", "1,512", True, False),
        ("add-9", "−275", True, False),  # the Unicode minus
        ("cap-Vietnam", "Ha Noi", True, False),
        ("cap-Switzerland", "Berne", True, False),
    ],
)
def test_where_the_rules_agree_and_part(
    item_id: str, reply: str, strict: bool, article: bool
) -> None:
    question = _questions()[item_id]
    assert score(question, reply, "strict")[0] is strict
    assert score(question, reply, "article")[0] is article
