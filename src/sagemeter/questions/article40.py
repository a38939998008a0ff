"""The source article's 40 checked questions, regenerated item for item from a fixed seed.

15 two-digit multiplications, 15 sums `a + b − c` of three-digit numbers, 10 capitals. The
shipped `article-40.json` is this generator's output; a test regenerates it and compares.
Run `python -m sagemeter.questions.article40` to rewrite the file.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

SEED = 20260925  # the article's measurement date
MULTIPLICATIONS = 15
SUMS = 15
CAPITALS = 10
NUMBER_ONLY = "Reply with the number only."

# Closed-world facts: each country's capital and a pattern that accepts its usual spellings only.
CAPITAL_TABLE: tuple[tuple[str, str, str], ...] = (
    ("France", "Paris", r"\bParis\b"),
    ("Japan", "Tokyo", r"\bTokyo\b"),
    ("Australia", "Canberra", r"\bCanberra\b"),
    ("Canada", "Ottawa", r"\bOttawa\b"),
    ("Brazil", "Brasília", r"\bBras[ií]lia\b"),
    ("Egypt", "Cairo", r"\bCairo\b"),
    ("Kenya", "Nairobi", r"\bNairobi\b"),
    ("Peru", "Lima", r"\bLima\b"),
    ("Norway", "Oslo", r"\bOslo\b"),
    ("Italy", "Rome", r"\bRome\b"),
    ("Spain", "Madrid", r"\bMadrid\b"),
    ("Germany", "Berlin", r"\bBerlin\b"),
    ("Turkey", "Ankara", r"\bAnkara\b"),
    ("Vietnam", "Hanoi", r"\bHa ?noi\b"),
    ("Argentina", "Buenos Aires", r"\bBuenos Aires\b"),
    ("Poland", "Warsaw", r"\bWarsaw\b"),
    ("Thailand", "Bangkok", r"\bBangkok\b"),
    ("Portugal", "Lisbon", r"\bLisbon\b"),
    ("Sweden", "Stockholm", r"\bStockholm\b"),
    ("Mexico", "Mexico City", r"\bMexico City\b"),
)


def generate(seed: int = SEED) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    items: list[dict[str, Any]] = []
    for index in range(MULTIPLICATIONS):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        items.append(
            {
                "id": f"mul-{index + 1:02d}",
                "family": "multiplication",
                "prompt": f"What is {a} × {b}? {NUMBER_ONLY}",
                "answer": str(a * b),
            }
        )
    for index in range(SUMS):
        a, b, c = (rng.randint(100, 999) for _ in range(3))
        items.append(
            {
                "id": f"sum-{index + 1:02d}",
                "family": "a+b-c",
                "prompt": f"What is {a} + {b} - {c}? {NUMBER_ONLY}",
                "answer": str(a + b - c),
            }
        )
    for index, (country, capital, pattern) in enumerate(rng.sample(CAPITAL_TABLE, CAPITALS)):
        items.append(
            {
                "id": f"cap-{index + 1:02d}",
                "family": "capitals",
                "prompt": f"What is the capital of {country}? Reply with the city name only.",
                "answer": capital,
                "pattern": pattern,
            }
        )
    return items


def render(seed: int = SEED) -> str:
    payload = {"name": "article-40", "seed": seed, "questions": generate(seed)}
    return json.dumps(payload, indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    (Path(__file__).parent / "article-40.json").write_text(render(), encoding="utf-8")
