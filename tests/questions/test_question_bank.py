"""The shipped bank: reproducible byte for byte, big and balanced, and every answer recomputed
here from its prompt by means independent of the generators."""

from __future__ import annotations

import ast
import calendar
import datetime as dt
import json
import operator
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from sagemeter.cli.questions import register
from sagemeter.errors import UserError
from sagemeter.questions import BUILTIN_DIR, Question, builtin_sets, load_question_set
from sagemeter.questions.bank import SEED, render
from sagemeter.questions.scoring import answer_kind, score_reply


@pytest.fixture(scope="module")
def bank() -> list[Question]:
    return load_question_set("bank-1000").questions


def test_bank_file_is_the_generator_output_byte_for_byte() -> None:
    assert (BUILTIN_DIR / "bank-1000.json").read_bytes() == render().encode("utf-8")


def test_the_seed_decides_the_bank() -> None:
    assert render(SEED + 1) != render()
    assert render(SEED + 1) == render(SEED + 1)


def test_bank_is_big_balanced_and_listed(bank: list[Question]) -> None:
    assert "bank-1000" in builtin_sets() and "article-40" in builtin_sets()
    families = Counter(q.family for q in bank)
    assert len(bank) >= 1000
    assert len(families) >= 10
    assert min(families.values()) >= 50
    assert len({q.id for q in bank}) == len(bank)
    assert len({q.prompt for q in bank}) == len(bank)


# The instruction each kind of answer must end its prompt with.
FORM_ENDINGS = {
    "number": ("Reply with the number only.", "Reply with the number only, without %."),
    "date": ("Reply with the date as YYYY-MM-DD.",),
    "time": ("Reply with the time as HH:MM.",),
    "pattern": (
        "Reply with the word only.",
        "Reply with the city name only.",
        "Reply with the symbol only.",
    ),
}


def test_every_prompt_names_the_answer_form(bank: list[Question]) -> None:
    for q in bank:
        kind = answer_kind(q)
        assert kind != "text", q.id
        assert q.prompt.endswith(FORM_ENDINGS[kind]), q.id


_OPERATORS: dict[type[ast.operator], Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _evaluate(node: ast.expr) -> Fraction:
    """Exact arithmetic on + - × ÷ and parentheses only."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    raise AssertionError(f"unexpected expression {ast.dump(node)}")


def _expression_value(prompt: str) -> int:
    expression = re.fullmatch(r"What is (.+)\? Reply with the number only\.", prompt)
    assert expression is not None, prompt
    text = expression[1].replace("×", "*").replace("÷", "/")
    value = _evaluate(ast.parse(text, mode="eval").body)
    assert value.denominator == 1, prompt
    return int(value)


def _ints(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"-?\d+", text)]


def _iso(text: str) -> list[dt.date]:
    return [dt.date.fromisoformat(d) for d in re.findall(r"\d{4}-\d{2}-\d{2}", text)]


def _minutes(text: str) -> list[int]:
    return [int(h) * 60 + int(m) for h, m in re.findall(r"(\d{2}):(\d{2})", text)]


UNIT_FACTORS = {
    ("kilometres", "metres"): 1000,
    ("metres", "centimetres"): 100,
    ("centimetres", "millimetres"): 10,
    ("kilograms", "grams"): 1000,
    ("tonnes", "kilograms"): 1000,
    ("litres", "millilitres"): 1000,
    ("hours", "minutes"): 60,
    ("minutes", "seconds"): 60,
    ("hours", "seconds"): 3600,
    ("days", "hours"): 24,
    ("weeks", "days"): 7,
    ("years", "months"): 12,
    ("dozens", "items"): 12,
}
POSITIONS = {"first": 1, "second": 2, "third": 3, "fourth": 4}


def _recomputed(q: Question) -> str | None:
    """The answer worked out from the prompt alone; None for the closed-world fact families."""
    p = q.prompt
    if q.family in {
        "addition",
        "subtraction",
        "multiplication-2x3",
        "multiplication-3x3",
        "order-of-operations",
    } or (q.family == "division" and "÷" in p):
        return str(_expression_value(p))
    if q.family == "division":
        dividend, divisor = _ints(p)
        return str(
            dividend % divisor if p.startswith("What is the remainder") else dividend // divisor
        )
    if q.family == "percentages":
        numbers = [Fraction(n) for n in _ints(p)]
        if p.startswith("What is"):
            return str(numbers[0] * numbers[1] / 100)
        if p.startswith("What percentage"):
            return str(numbers[1] / numbers[0] * 100)
        return str(numbers[0] * (100 + numbers[1]) / 100)
    if q.family == "unit-conversion":
        match = re.fullmatch(r"Convert (\d+) (\w+) to (\w+)\. Reply with the number only\.", p)
        assert match is not None, p
        amount, source, target = int(match[1]), match[2], match[3]
        if (source, target) in UNIT_FACTORS:
            return str(amount * UNIT_FACTORS[source, target])
        value = Fraction(amount, UNIT_FACTORS[target, source])
        assert value.denominator == 1, p
        return str(value)
    if q.family == "letter-count":
        letter, word = re.findall(r'"(\w+)"', p)
        return str(word.count(letter))
    if q.family == "ordering":
        match = re.fullmatch(
            r"Which number is the (?:(\w+) )?(largest|smallest) in this list: ([-\d, ]+)\? .*", p
        )
        assert match is not None, p
        ranked = sorted(_ints(match[3]), reverse=match[2] == "largest")
        return str(ranked[POSITIONS[match[1] or "first"] - 1])
    if q.family == "alphabetical":
        match = re.fullmatch(
            r"Put these words in alphabetical order: ([a-z, ]+)\. .* (\w+)\? .*", p
        )
        assert match is not None, p
        return sorted(match[1].split(", "))[POSITIONS[match[2]] - 1]
    if q.family == "weekday":
        match = re.search(r"is (\d+ \w+ \d{4})\?", p)
        assert match is not None, p
        return dt.datetime.strptime(match[1], "%d %B %Y").strftime("%A")
    if q.family == "days-between":
        start, end = _iso(p)
        return str((end - start).days)
    if q.family == "date-add":
        days, start = _ints(p)[0], _iso(p)[0]
        sign = 1 if " after " in p else -1
        return (start + sign * dt.timedelta(days=days)).isoformat()
    if q.family == "clock-add":
        start = _minutes(p)[0]
        delta = int(re.findall(r"(\d+) minutes", p)[0])
        end = (start + (delta if "later" in p else -delta)) % (24 * 60)
        return f"{end // 60:02d}:{end % 60:02d}"
    if q.family == "clock-duration":
        start, end = _minutes(p)
        return str(end - start)
    if q.family == "days-in-month":
        match = re.search(r"in (\w+) (\d{4})\?", p)
        assert match is not None, p
        month = list(calendar.month_name).index(match[1])
        return str(calendar.monthrange(int(match[2]), month)[1])
    return None


def test_every_computable_answer_is_recomputed_from_its_prompt(bank: list[Question]) -> None:
    unchecked = Counter(q.family for q in bank if _recomputed(q) is None)
    assert set(unchecked) == {"word-problems", "capitals", "chemical-symbols"}
    for q in bank:
        expected = _recomputed(q)
        if expected is not None:
            assert q.answer == expected, q.id


# Word problems are checked by solving each template here, longhand.
WORD_PROBLEM_SOLVERS: list[tuple[str, Callable[[list[int]], int]]] = [
    (r"orders (\d+) boxes of (\d+) pencils and hands out (\d+)", lambda n: n[0] * n[1] - n[2]),
    (
        r"saves (\d+) dollars every week for (\d+) weeks .* spends (\d+)",
        lambda n: n[0] * n[1] - n[2],
    ),
    (
        r"leaves with (\d+) passengers\. .* (\d+) get off and (\d+) get on; .* (\d+) get off",
        lambda n: n[0] - n[1] + n[2] - n[3],
    ),
    (r"makes (\d+) trays of (\d+) muffins .* boxes of (\d+)\.", lambda n: n[0] * n[1] // n[2]),
    (
        r"cost (\d+) dollars for an adult and (\d+) dollars for a child\. .* (\d+) adults and (\d+) children",
        lambda n: n[0] * n[2] + n[1] * n[3],
    ),
    (
        r"holds (\d+) litres and already has (\d+) litres .* at (\d+) litres per minute",
        lambda n: (n[0] - n[1]) // n[2],
    ),
    (
        r"(\d+) friends split a restaurant bill of (\d+) dollars .* a (\d+)-dollar coupon",
        lambda n: (n[1] - n[2]) // n[0],
    ),
    (r"(\d+) chickens and (\d+) goats", lambda n: 2 * n[0] + 4 * n[1]),
]


def test_word_problems_solve_to_their_answers(bank: list[Question]) -> None:
    templates_seen = set()
    for q in (q for q in bank if q.family == "word-problems"):
        solved = [
            (index, solve([int(n) for n in match.groups()]))
            for index, (pattern, solve) in enumerate(WORD_PROBLEM_SOLVERS)
            if (match := re.search(pattern, q.prompt))
        ]
        assert len(solved) == 1, q.prompt
        templates_seen.add(solved[0][0])
        assert q.answer == str(solved[0][1]) and solved[0][1] >= 0, q.id
    assert len(templates_seen) == len(WORD_PROBLEM_SOLVERS)


# Closed-world facts, written out here independently of the generator's tables.
KNOWN_FACTS = {
    "Japan": "Tokyo",
    "Australia": "Canberra",
    "Canada": "Ottawa",
    "Turkey": "Ankara",
    "Nigeria": "Abuja",
    "Pakistan": "Islamabad",
    "New Zealand": "Wellington",
    "iron": "Fe",
    "sodium": "Na",
    "potassium": "K",
    "gold": "Au",
    "silver": "Ag",
    "lead": "Pb",
    "tungsten": "W",
    "mercury": "Hg",
    "tin": "Sn",
}


def test_closed_world_answers_agree_with_known_facts(bank: list[Question]) -> None:
    facts = [q for q in bank if q.family in {"capitals", "chemical-symbols"}]
    asked = {re.findall(r"(?:capital|symbol) of (.+?)\?", q.prompt)[0]: q.answer for q in facts}
    assert len(asked) == len(facts)  # no country or element asked twice
    checked = [subject for subject in KNOWN_FACTS if subject in asked]
    assert len(checked) >= 8
    for subject in checked:
        assert asked[subject] == KNOWN_FACTS[subject], subject


def _wrong_answers(q: Question, bank: list[Question]) -> list[str]:
    """Plausible wrong replies: a neighbouring value, or another member of the answer's class."""
    kind = answer_kind(q)
    if kind == "number":
        value = int(q.answer)
        return [str(value + 1), str(value - 1), str(value * 10 or 10), str(-value or 100)]
    if kind == "date":
        day = dt.date.fromisoformat(q.answer)
        return [(day + dt.timedelta(days=1)).isoformat(), day.strftime("%d/%m/%Y")]
    if kind == "time":
        minutes = _minutes(q.answer)[0] + 1
        return [f"{minutes // 60 % 24:02d}:{minutes % 60:02d}", q.answer + ":00"]
    if q.family == "alphabetical":
        listed = re.findall(r"order: ([a-z, ]+)\.", q.prompt)[0].split(", ")
        return [word for word in listed if word != q.answer]
    return sorted({other.answer for other in bank if other.family == q.family} - {q.answer})


def test_every_item_credits_its_answer_and_nothing_else(bank: list[Question]) -> None:
    for q in bank:
        assert score_reply(q, q.answer)[0], q.id
        assert score_reply(q, f"The answer is **{q.answer}**.")[0], q.id
        for wrong in _wrong_answers(q, bank):
            assert not score_reply(q, wrong)[0], (q.id, wrong)
            assert not score_reply(q, f"{q.answer}, or maybe {wrong}")[0], (q.id, wrong)
            if answer_kind(q) == "pattern":  # the last member of the class counts
                assert score_reply(q, f"Not {wrong}: {q.answer}.")[0], (q.id, wrong)


def test_user_jsonl_items_pick_their_rule_from_the_answer(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(
        '{"prompt": "d?", "answer": "2024-03-05"}\n'
        '{"prompt": "t?", "answer": "09:05"}\n'
        '{"prompt": "n?", "answer": "-12"}\n'
        '{"prompt": "w?", "answer": "Lima", "pattern": "Lima"}\n'
        '{"prompt": "x?", "answer": "blue"}\n',
        encoding="utf-8",
    )
    kinds = [answer_kind(q) for q in load_question_set(str(path)).questions]
    assert kinds == ["date", "time", "number", "pattern", "text"]


def test_a_broken_pattern_is_refused_at_load_time(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "?", "answer": "a", "pattern": "(unclosed"}\n', encoding="utf-8")
    with pytest.raises(UserError, match="item 1: pattern"):
        load_question_set(str(path))


def _cli() -> typer.Typer:
    app = typer.Typer(add_completion=False)

    @app.callback()
    def main() -> None:
        """The main CLI's shape: a group that feature modules add commands to."""

    register(app)
    return app


def test_questions_list_names_every_built_in_set() -> None:
    done = CliRunner().invoke(_cli(), ["questions", "list"], env={"COLUMNS": "400"})
    assert done.exit_code == 0, done.output
    rows = {line.split("│")[1].strip(): line for line in done.output.splitlines() if "│" in line}
    assert {"article-40", "bank-1000"} <= set(rows)
    assert re.search(
        r"│\s+1000\s+│\s+20\s+│ addition \(50\), subtraction \(50\)", rows["bank-1000"]
    )
    assert re.search(r"│\s+40\s+│\s+3\s+│ mul \(15\), add \(15\), cap \(10\)", rows["article-40"])


def test_questions_show_filters_by_family_and_limits() -> None:
    args = ["questions", "show", "bank-1000", "--family", "date-add", "--limit", "3"]
    done = CliRunner().invoke(_cli(), args, env={"COLUMNS": "400"})
    assert done.exit_code == 0, done.output
    assert "bank-1000: 3 of 50 items" in done.output
    rows = [line for line in done.output.splitlines() if "│ date-add │" in line]
    assert [row.split("│")[1].strip() for row in rows] == ["dadd-001", "dadd-002", "dadd-003"]
    assert all("│ date " in row and "Reply with the date as YYYY-MM-DD." in row for row in rows)


def test_questions_show_reads_a_user_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text('{"prompt": "What is 2+2?", "answer": "4"}\n', encoding="utf-8")
    done = CliRunner().invoke(_cli(), ["questions", "show", str(path), "--limit", "0"])
    assert done.exit_code == 0, done.output
    assert "mine: 1 of 1 items" in done.output and "What is 2+2?" in done.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["bank-1000", "--family", "nope"], "has no family 'nope'; its families: addition"),
        (["bank-1000", "--limit", "-1"], "--limit -1"),
        (["no-such-set"], "neither built in"),
    ],
)
def test_questions_show_bad_input_is_a_user_error(args: list[str], needle: str) -> None:
    done = CliRunner().invoke(_cli(), ["questions", "show", *args])
    assert isinstance(done.exception, UserError)
    assert needle in str(done.exception)


@pytest.mark.slow
@pytest.mark.parametrize("name", builtin_sets())
def test_questions_show_json_prints_every_item_of_every_built_in_set(
    name: str, sagemeter_env: dict[str, str]
) -> None:
    """The real command, as a script would call it: every item, the set's own order and ids."""
    done = subprocess.run(
        [sys.executable, "-m", "sagemeter", "questions", "show", name, "--json"],
        capture_output=True,
        text=True,
        env=sagemeter_env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    question_set = load_question_set(name)
    assert payload["name"] == name and payload["sha256"] == question_set.sha256
    assert payload["provenance"] == question_set.provenance
    assert [
        {key: item[key] for key in ("id", "family", "prompt", "answer")}
        for item in payload["items"]
    ] == [
        {"id": q.id, "family": q.family, "prompt": q.prompt, "answer": q.answer}
        for q in question_set.questions
    ]
    assert [item["scored_as"] for item in payload["items"]] == [
        answer_kind(q) for q in question_set.questions
    ]


def test_questions_show_json_keeps_a_family_and_limit() -> None:
    args = ["questions", "show", "article-40", "--family", "cap", "--limit", "2", "--json"]
    done = CliRunner().invoke(_cli(), args)
    assert done.exit_code == 0, done.output
    items = json.loads(done.output)["items"]
    assert [item["id"] for item in items] == ["cap-Australia", "cap-Canada"]
    assert items[1]["prompt"] == "What is the capital of Canada? Answer in one word."
    assert items[1]["scored_as"] == "pattern" and "Ottawa" in items[1]["pattern"]
