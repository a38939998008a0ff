"""The source article's 40 checked questions, word for word, and where they come from.

The article's repository (https://github.com/xbill9/sagemaker-gemma, `compare.py`) draws them
from `random.Random(20260925)`: 15 products `a * b` of two operands from 12 to 99, then 15 sums
`a + b - c` of three operands from 100 to 999, then ten capitals in a fixed order. Its prompts are
`What is 54 * 28? Reply with the number only.` and `What is the capital of Australia? Answer in
one word.`; its ids `mul-0` … `add-14`, `cap-Australia` … `cap-Vietnam`; its families the id
prefixes `mul`, `add`, `cap`.

`article-40.json` beside this module is the shipped data: the 40 items with the provenance
below. Each capital also carries the pattern our strict scorer reads (the city as a whole word
with no other capital named after it); the article scored by its own rule (see `scoring.py`).
A test regenerates the file from the seed and checks every item against the answers the
article's three result files recorded. `python -m sagemeter.questions.article40` rewrites it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from sagemeter.atomic import write_text_atomic
from sagemeter.questions.bank import CAPITALS as BANK_CAPITALS
from sagemeter.questions.bank import class_pattern

NAME = "article-40"
SEED = 20260925  # the article's measurement date, the seed of its question generator
PRODUCTS = 15
SUMS = 15
NUMBER_ONLY = "Reply with the number only."
ONE_WORD = "Answer in one word."

# The article's ten capitals in its order, each with the spellings our strict rule accepts.
ARTICLE_CAPITALS: tuple[tuple[str, str, str], ...] = (
    ("Australia", "Canberra", "Canberra"),
    ("Canada", "Ottawa", "Ottawa"),
    ("Brazil", "Brasília", "Bras[ií]lia"),
    ("Turkey", "Ankara", "Ankara"),
    ("Nigeria", "Abuja", "Abuja"),
    ("Switzerland", "Bern", "Berne?"),
    ("Pakistan", "Islamabad", "Islamabad"),
    ("New Zealand", "Wellington", "Wellington"),
    ("Morocco", "Rabat", "Rabat"),
    ("Vietnam", "Hanoi", "Ha ?noi"),
)

PROVENANCE: dict[str, Any] = {
    "source": "the source article's 40 checked questions (Gemma 4 E2B, QAT against bf16 on one "
    "SageMaker ml.g6.xlarge, measured 2026-09-25)",
    "repository": "https://github.com/xbill9/sagemaker-gemma (compare.py, its questions())",
    "seed": SEED,
    "drawn": "random.Random(seed): 15 pairs of randint(12, 99) for a * b, then 15 triples of "
    "randint(100, 999) for a + b - c, then the ten capitals in the article's order",
    "checked": "every answer against the 120 answers the article's three result files recorded "
    "(54 * 28 = 1512 first; the sums its table names are add-4, add-7, add-8, add-9, add-14)",
    "pattern": "ours, not the article's: what the strict scorer reads for a capital",
}


def generate(seed: int = SEED) -> list[dict[str, Any]]:
    """The 40 items in the article's order, drawn from the seed as its generator draws them."""
    rng = random.Random(seed)
    items: list[dict[str, Any]] = []
    for index in range(PRODUCTS):
        a, b = rng.randint(12, 99), rng.randint(12, 99)
        items.append(_item(f"mul-{index}", "mul", f"What is {a} * {b}? {NUMBER_ONLY}", a * b))
    for index in range(SUMS):
        a, b, c = rng.randint(100, 999), rng.randint(100, 999), rng.randint(100, 999)
        prompt = f"What is {a} + {b} - {c}? {NUMBER_ONLY}"
        items.append(_item(f"add-{index}", "add", prompt, a + b - c))
    spellings = _capital_class()
    for country, city, spelling in ARTICLE_CAPITALS:
        item = _item(f"cap-{country}", "cap", f"What is the capital of {country}? {ONE_WORD}", city)
        item["pattern"] = class_pattern(spelling, spellings)
        items.append(item)
    return items


def _item(item_id: str, family: str, prompt: str, answer: object) -> dict[str, Any]:
    return {"id": item_id, "family": family, "prompt": prompt, "answer": str(answer)}


def _capital_class() -> list[str]:
    """Every capital spelling either set knows: naming any of them after the answer is a change
    of mind, so the strict rule credits only a reply whose last capital is the right one."""
    spellings = [spelling for _, _, spelling in ARTICLE_CAPITALS]
    spellings += [s for _, _, s in BANK_CAPITALS if s not in spellings]
    return spellings


def render(seed: int = SEED) -> str:
    """The shipped file: provenance first, then one question per line."""
    lines = [
        "{",
        f'  "name": {json.dumps(NAME)},',
        f'  "provenance": {json.dumps(PROVENANCE, ensure_ascii=False)},',
        '  "questions": [',
        ",\n".join("    " + json.dumps(item, ensure_ascii=False) for item in generate(seed)),
        "  ]",
        "}",
    ]
    return "\n".join(lines) + "\n"


def article_path() -> Path:
    return Path(__file__).parent / f"{NAME}.json"


if __name__ == "__main__":
    write_text_atomic(article_path(), render())
