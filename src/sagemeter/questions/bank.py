"""The `bank-1000` question set: 20 families of 50 exact-answer items, regenerated from fixed seeds.

Each family is one function drawing one item from its own `random.Random` (seeded with the set
seed and the family name, so changing one family never moves another); the set is the first 50
distinct prompts of each. Every prompt says the form of the answer, and every answer is of a kind
the strict scorer (`scoring.py`) reads: a number, a `YYYY-MM-DD` date, an `HH:MM` time, or a word
with a pattern that makes the last word of its closed class count (the answer, with no other
weekday, capital, symbol or listed word after it).

The families follow the shape of reasoning-gym's seeded procedural datasets (Apache-2.0;
`basic_arithmetic`, `chain_sum`, `products`, `calendar_arithmetic`, `time_intervals`,
`letter_counting`, `number_sorting`, `word_sorting`), written here without it so that the bank has
no runtime dependency and every answer has exactly one accepted form.

Run `python -m sagemeter.questions.bank` to rewrite `bank-1000.json`; a test regenerates it and
compares byte for byte.
"""

from __future__ import annotations

import calendar
import datetime as dt
import json
import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from sagemeter.atomic import write_text_atomic

NAME = "bank-1000"
SEED = 20260925
PER_FAMILY = 50

NUMBER_ONLY = "Reply with the number only."
WORD_ONLY = "Reply with the word only."
DATE_FORM = "Reply with the date as YYYY-MM-DD."
TIME_FORM = "Reply with the time as HH:MM."


class Draft(NamedTuple):
    """One generated item before it gets its id and family."""

    prompt: str
    answer: str
    pattern: str | None = None


# Closed-world tables. Patterns accept the usual spellings of one answer and nothing else.
CAPITALS: tuple[tuple[str, str, str], ...] = (
    ("France", "Paris", r"Paris"),
    ("Japan", "Tokyo", r"Tokyo"),
    ("Australia", "Canberra", r"Canberra"),
    ("Canada", "Ottawa", r"Ottawa"),
    ("Brazil", "Brasília", r"Bras[ií]lia"),
    ("Egypt", "Cairo", r"Cairo"),
    ("Kenya", "Nairobi", r"Nairobi"),
    ("Peru", "Lima", r"Lima"),
    ("Norway", "Oslo", r"Oslo"),
    ("Italy", "Rome", r"Rome"),
    ("Spain", "Madrid", r"Madrid"),
    ("Germany", "Berlin", r"Berlin"),
    ("Turkey", "Ankara", r"Ankara"),
    ("Vietnam", "Hanoi", r"Ha ?noi"),
    ("Argentina", "Buenos Aires", r"Buenos Aires"),
    ("Poland", "Warsaw", r"Warsaw"),
    ("Thailand", "Bangkok", r"Bangkok"),
    ("Portugal", "Lisbon", r"Lisbon"),
    ("Sweden", "Stockholm", r"Stockholm"),
    ("Mexico", "Mexico City", r"Mexico City"),
    ("China", "Beijing", r"Beijing"),
    ("India", "New Delhi", r"(?:New )?Delhi"),
    ("Russia", "Moscow", r"Moscow"),
    ("the United Kingdom", "London", r"London"),
    ("Ireland", "Dublin", r"Dublin"),
    ("Greece", "Athens", r"Athens"),
    ("Austria", "Vienna", r"Vienna"),
    ("Hungary", "Budapest", r"Budapest"),
    ("the Czech Republic", "Prague", r"Prague"),
    ("Finland", "Helsinki", r"Helsinki"),
    ("Denmark", "Copenhagen", r"Copenhagen"),
    ("Belgium", "Brussels", r"Brussels"),
    ("Chile", "Santiago", r"Santiago"),
    ("Colombia", "Bogotá", r"Bogot[aá]"),
    ("Venezuela", "Caracas", r"Caracas"),
    ("Cuba", "Havana", r"Havana"),
    ("Morocco", "Rabat", r"Rabat"),
    ("Nigeria", "Abuja", r"Abuja"),
    ("Ghana", "Accra", r"Accra"),
    ("Ethiopia", "Addis Ababa", r"Addis Ababa"),
    ("South Korea", "Seoul", r"Seoul"),
    ("the Philippines", "Manila", r"Manila"),
    ("Iran", "Tehran", r"Tehe?ran"),
    ("Iraq", "Baghdad", r"Baghdad"),
    ("Saudi Arabia", "Riyadh", r"Riyadh"),
    ("Pakistan", "Islamabad", r"Islamabad"),
    ("Bangladesh", "Dhaka", r"Dhaka"),
    ("Nepal", "Kathmandu", r"Kathmandu"),
    ("New Zealand", "Wellington", r"Wellington"),
    ("Ukraine", "Kyiv", r"(?:Kyiv|Kiev)"),
    ("Romania", "Bucharest", r"Bucharest"),
    ("Serbia", "Belgrade", r"Belgrade"),
    ("Iceland", "Reykjavík", r"Reykjav[ií]k"),
    ("Senegal", "Dakar", r"Dakar"),
)

# Elements whose symbol is not also a common English word (no He, Be, In, As, At, I, No).
ELEMENTS: tuple[tuple[str, str], ...] = (
    ("hydrogen", "H"),
    ("lithium", "Li"),
    ("boron", "B"),
    ("carbon", "C"),
    ("nitrogen", "N"),
    ("oxygen", "O"),
    ("fluorine", "F"),
    ("neon", "Ne"),
    ("sodium", "Na"),
    ("magnesium", "Mg"),
    ("aluminium", "Al"),
    ("silicon", "Si"),
    ("phosphorus", "P"),
    ("sulfur", "S"),
    ("chlorine", "Cl"),
    ("argon", "Ar"),
    ("potassium", "K"),
    ("calcium", "Ca"),
    ("titanium", "Ti"),
    ("vanadium", "V"),
    ("chromium", "Cr"),
    ("manganese", "Mn"),
    ("iron", "Fe"),
    ("cobalt", "Co"),
    ("nickel", "Ni"),
    ("copper", "Cu"),
    ("zinc", "Zn"),
    ("gallium", "Ga"),
    ("germanium", "Ge"),
    ("selenium", "Se"),
    ("bromine", "Br"),
    ("krypton", "Kr"),
    ("strontium", "Sr"),
    ("zirconium", "Zr"),
    ("molybdenum", "Mo"),
    ("silver", "Ag"),
    ("cadmium", "Cd"),
    ("tin", "Sn"),
    ("antimony", "Sb"),
    ("xenon", "Xe"),
    ("caesium", "Cs"),
    ("barium", "Ba"),
    ("tungsten", "W"),
    ("platinum", "Pt"),
    ("gold", "Au"),
    ("mercury", "Hg"),
    ("lead", "Pb"),
    ("bismuth", "Bi"),
    ("radon", "Rn"),
    ("radium", "Ra"),
    ("uranium", "U"),
    ("plutonium", "Pu"),
)

WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

WORDS: tuple[str, ...] = (
    "apple", "banana", "cherry", "strawberry", "pineapple", "coconut", "mississippi",
    "bookkeeper", "committee", "balloon", "address", "success", "necessary", "embarrass",
    "occurrence", "parallel", "millennium", "accommodate", "possession", "referee",
    "engineer", "tomorrow", "umbrella", "elephant", "giraffe", "kangaroo", "hippopotamus",
    "alligator", "butterfly", "caterpillar", "grasshopper", "dragonfly", "mosquito",
    "volcano", "avalanche", "hurricane", "thunderstorm", "rainbow", "satellite", "telescope",
    "microscope", "laboratory", "chemistry", "astronomy", "geography", "mathematics",
    "vocabulary", "dictionary", "encyclopedia", "library", "calendar", "breakfast",
    "restaurant", "chocolate", "spaghetti", "broccoli", "cinnamon", "pepperoni", "avocado",
    "watermelon", "blueberry", "raspberry", "tangerine", "potato", "tomato", "cucumber",
    "lemonade", "marshmallow", "sassafras", "barbarian", "papaya", "assessment",
    "bubblegum", "cappuccino", "lollipop", "peppermint", "referendum", "abracadabra",
    "onomatopoeia", "kaleidoscope",
)  # fmt: skip

NOUNS: tuple[str, ...] = (
    "anchor", "basket", "candle", "desert", "engine", "falcon", "garden", "harbor", "island",
    "jacket", "kettle", "ladder", "marble", "needle", "orchid", "pencil", "quartz", "rocket",
    "saddle", "tunnel", "velvet", "wallet", "yogurt", "zipper", "bridge", "castle", "forest",
    "guitar", "hammer", "lantern", "mirror", "planet", "river", "silver", "ticket", "violin",
    "window", "button", "carpet", "dragon", "feather", "glacier", "helmet", "meadow", "nickel",
    "oyster", "parrot", "rabbit", "shadow", "timber", "beacon", "bottle", "cactus", "canyon",
    "cobalt", "copper", "crayon", "pebble", "puzzle", "saucer",
)  # fmt: skip

MONTH_NAMES = tuple(calendar.month_name)[1:]

# (quantity from, quantity to, factor): `from` × factor = `to`, all exact in whole numbers.
UNITS: tuple[tuple[str, str, int], ...] = (
    ("kilometres", "metres", 1000),
    ("metres", "centimetres", 100),
    ("centimetres", "millimetres", 10),
    ("kilograms", "grams", 1000),
    ("tonnes", "kilograms", 1000),
    ("litres", "millilitres", 1000),
    ("hours", "minutes", 60),
    ("minutes", "seconds", 60),
    ("hours", "seconds", 3600),
    ("days", "hours", 24),
    ("weeks", "days", 7),
    ("years", "months", 12),
    ("dozens", "items", 12),
)


def class_pattern(answer: str, members: Sequence[str], *, case_sensitive: bool = False) -> str:
    """`answer` as a whole word with no other member of its closed class after it."""

    def word(body: str) -> str:
        return f"(?-i:\\b{body}\\b)" if case_sensitive else f"\\b{body}\\b"

    alternatives = "|".join(members)
    return f"(?s){word(answer)}(?!.*{word(f'(?:{alternatives})')})"


def _nth(position: int) -> str:
    return ("first", "second", "third", "fourth")[position - 1]


def addition(rng: random.Random) -> Draft:
    digits = rng.choices(range(3, 7), k=rng.randint(2, 4))
    terms = [rng.randint(10 ** (d - 1), 10**d - 1) for d in digits]
    return Draft(f"What is {' + '.join(map(str, terms))}? {NUMBER_ONLY}", str(sum(terms)))


def subtraction(rng: random.Random) -> Draft:
    a, b = rng.randint(100, 99999), rng.randint(100, 99999)
    form = rng.randrange(3)
    if form == 0:  # a smaller minus a larger: a negative result
        a, b = sorted((a, b))
        return Draft(f"What is {a} - {b}? {NUMBER_ONLY}", str(a - b))
    if form == 1:
        return Draft(f"What is -{a} - {b}? {NUMBER_ONLY}", str(-a - b))
    return Draft(f"What is {a} - (-{b})? {NUMBER_ONLY}", str(a + b))


def multiplication_2x3(rng: random.Random) -> Draft:
    a, b = rng.randint(10, 99), rng.randint(100, 999)
    if rng.random() < 0.5:
        a, b = b, a
    return Draft(f"What is {a} × {b}? {NUMBER_ONLY}", str(a * b))


def multiplication_3x3(rng: random.Random) -> Draft:
    a, b = rng.randint(100, 999), rng.randint(100, 999)
    return Draft(f"What is {a} × {b}? {NUMBER_ONLY}", str(a * b))


def division(rng: random.Random) -> Draft:
    divisor = rng.randint(12, 99)
    form = rng.randrange(3)
    if form == 0:
        quotient = rng.randint(100, 999)
        return Draft(f"What is {divisor * quotient} ÷ {divisor}? {NUMBER_ONLY}", str(quotient))
    dividend = rng.randint(1000, 99999)
    if form == 1:
        prompt = f"What is the remainder when {dividend} is divided by {divisor}? {NUMBER_ONLY}"
        return Draft(prompt, str(dividend % divisor))
    prompt = (
        f"What is the whole-number quotient when {dividend} is divided by {divisor}, "
        f"ignoring the remainder? {NUMBER_ONLY}"
    )
    return Draft(prompt, str(dividend // divisor))


def order_of_operations(rng: random.Random) -> Draft:
    a, b, c, d = (rng.randint(2, 60) for _ in range(4))
    form = rng.randrange(4)
    if form == 0:
        expression, value = f"{a} + {b} × {c} - {d}", a + b * c - d
    elif form == 1:
        expression, value = f"({a} + {b}) × {c} - {d}", (a + b) * c - d
    elif form == 2:
        expression, value = f"{a} × {b} - {c} × {d}", a * b - c * d
    else:
        expression, value = f"{a * b} ÷ {b} + {c} × {d}", a + c * d
    return Draft(f"What is {expression}? {NUMBER_ONLY}", str(value))


def word_problems(rng: random.Random) -> Draft:
    form = rng.randrange(8)
    if form == 0:
        boxes, each = rng.randint(12, 48), rng.randint(12, 36)
        given = rng.randint(50, boxes * each - 1)
        text = (
            f"A school orders {boxes} boxes of {each} pencils and hands out {given} pencils. "
            "How many pencils are left?"
        )
        return Draft(f"{text} {NUMBER_ONLY}", str(boxes * each - given))
    if form == 1:
        weekly, weeks = rng.randint(15, 95), rng.randint(4, 30)
        spent = rng.randint(10, weekly * weeks - 1)
        text = (
            f"Maya saves {weekly} dollars every week for {weeks} weeks and then spends {spent} "
            "dollars on a bike. How many dollars does she have left?"
        )
        return Draft(f"{text} {NUMBER_ONLY}", str(weekly * weeks - spent))
    if form == 2:
        start = rng.randint(20, 60)
        off1, on1 = rng.randint(1, start - 1), rng.randint(1, 30)
        off2 = rng.randint(1, start - off1 + on1)
        text = (
            f"A bus leaves with {start} passengers. At the first stop {off1} get off and {on1} get "
            f"on; at the second stop {off2} get off. How many passengers are on the bus now?"
        )
        return Draft(f"{text} {NUMBER_ONLY}", str(start - off1 + on1 - off2))
    if form == 3:
        box, boxes = rng.randint(4, 12), rng.randint(10, 60)
        trays = rng.choice([t for t in range(3, 13) if (box * boxes) % t == 0])
        per_tray = box * boxes // trays
        text = (
            f"A baker makes {trays} trays of {per_tray} muffins and packs all of them in boxes of "
            f"{box}. How many boxes does she fill?"
        )
        return Draft(f"{text} {NUMBER_ONLY}", str(boxes))
    if form == 4:
        adult, child = rng.randint(12, 40), rng.randint(5, 11)
        adults, children = rng.randint(2, 9), rng.randint(2, 12)
        text = (
            f"Tickets cost {adult} dollars for an adult and {child} dollars for a child. How many "
            f"dollars do {adults} adults and {children} children pay in total?"
        )
        return Draft(f"{text} {NUMBER_ONLY}", str(adult * adults + child * children))
    if form == 5:
        rate, minutes = rng.randint(3, 25), rng.randint(8, 60)
        already = rng.randint(10, 400)
        text = (
            f"A tank holds {already + rate * minutes} litres and already has {already} litres in "
            f"it. Water flows in at {rate} litres per minute. How many minutes until it is full?"
        )
        return Draft(f"{text} {NUMBER_ONLY}", str(minutes))
    if form == 6:
        friends, share = rng.randint(3, 9), rng.randint(12, 60)
        coupon = rng.randint(5, 40)
        text = (
            f"{friends} friends split a restaurant bill of {friends * share + coupon} dollars "
            f"equally after using a {coupon}-dollar coupon. How many dollars does each friend pay?"
        )
        return Draft(f"{text} {NUMBER_ONLY}", str(share))
    chickens, goats = rng.randint(3, 60), rng.randint(3, 40)
    text = (
        f"A farm has {chickens} chickens and {goats} goats. How many legs do these animals have "
        "in total?"
    )
    return Draft(f"{text} {NUMBER_ONLY}", str(2 * chickens + 4 * goats))


def percentages(rng: random.Random) -> Draft:
    percent = rng.choice([5, 10, 15, 20, 25, 30, 35, 40, 45, 60, 65, 75, 80, 90, 120, 150])
    base = rng.randint(2, 60) * 20  # 20 × a multiple of 5 is a multiple of 100: a whole answer
    part, rest = divmod(base * percent, 100)
    if rest:
        raise RuntimeError(f"{percent}% of {base} is not a whole number")
    form = rng.randrange(3)
    if form == 0:
        return Draft(f"What is {percent}% of {base}? {NUMBER_ONLY}", str(part))
    if form == 1:
        prompt = f"What percentage of {base} is {part}? Reply with the number only, without %."
        return Draft(prompt, str(percent))
    prompt = f"A price of {base} dollars rises by {percent}%. What is the new price? {NUMBER_ONLY}"
    return Draft(prompt, str(base + part))


def unit_conversion(rng: random.Random) -> Draft:
    source, target, factor = rng.choice(UNITS)
    amount = rng.randint(2, 250)
    if rng.random() < 0.5:
        return Draft(f"Convert {amount} {source} to {target}. {NUMBER_ONLY}", str(amount * factor))
    return Draft(f"Convert {amount * factor} {target} to {source}. {NUMBER_ONLY}", str(amount))


def letter_count(rng: random.Random) -> Draft:
    word = rng.choice(WORDS)
    if rng.random() < 0.85:
        letter = rng.choice(word)  # weighted by how often each letter occurs
    else:
        letter = rng.choice(sorted(set("abcdefghijklmnopqrstuvwxyz") - set(word)))
    prompt = f'How many times does the letter "{letter}" appear in the word "{word}"? {NUMBER_ONLY}'
    return Draft(prompt, str(word.count(letter)))


def ordering(rng: random.Random) -> Draft:
    numbers = rng.sample(range(-99, 1000), rng.randint(5, 8))
    position = rng.randint(1, 3)
    largest = rng.random() < 0.5
    ranked = sorted(numbers, reverse=largest)
    which = ("" if position == 1 else f"{_nth(position)} ") + ("largest" if largest else "smallest")
    listed = ", ".join(map(str, numbers))
    prompt = f"Which number is the {which} in this list: {listed}? {NUMBER_ONLY}"
    return Draft(prompt, str(ranked[position - 1]))


def alphabetical(rng: random.Random) -> Draft:
    words = rng.sample(NOUNS, rng.randint(5, 7))
    position = rng.randint(1, 4)
    answer = sorted(words)[position - 1]
    prompt = (
        f"Put these words in alphabetical order: {', '.join(words)}. Which word comes "
        f"{_nth(position)}? {WORD_ONLY}"
    )
    return Draft(prompt, answer, class_pattern(answer, words))


def _random_date(rng: random.Random, first: dt.date, last: dt.date) -> dt.date:
    return first + dt.timedelta(days=rng.randint(0, (last - first).days))


def weekday(rng: random.Random) -> Draft:
    day = _random_date(rng, dt.date(1900, 1, 1), dt.date(2099, 12, 31))
    answer = WEEKDAYS[day.weekday()]
    prompt = (
        f"What day of the week is {day.day} {MONTH_NAMES[day.month - 1]} {day.year}? {WORD_ONLY}"
    )
    return Draft(prompt, answer, class_pattern(answer, WEEKDAYS))


def days_between(rng: random.Random) -> Draft:
    start = _random_date(rng, dt.date(1990, 1, 1), dt.date(2035, 12, 31))
    end = start + dt.timedelta(days=rng.randint(2, 1200))
    prompt = f"How many days after {start.isoformat()} is {end.isoformat()}? {NUMBER_ONLY}"
    return Draft(prompt, str((end - start).days))


def date_add(rng: random.Random) -> Draft:
    start = _random_date(rng, dt.date(1990, 1, 1), dt.date(2035, 12, 31))
    days = rng.randint(2, 500)
    if rng.random() < 0.7:
        answer = start + dt.timedelta(days=days)
        prompt = f"What date is {days} days after {start.isoformat()}? {DATE_FORM}"
    else:
        answer = start - dt.timedelta(days=days)
        prompt = f"What date is {days} days before {start.isoformat()}? {DATE_FORM}"
    return Draft(prompt, answer.isoformat())


def _clock(minutes: int) -> str:
    return f"{minutes // 60 % 24:02d}:{minutes % 60:02d}"


def clock_add(rng: random.Random) -> Draft:
    start = rng.randrange(24 * 60)
    delta = rng.randint(5, 720)
    if rng.random() < 0.7:
        prompt = (
            f"On a 24-hour clock it is {_clock(start)}. What time will it be {delta} minutes "
            f"later? {TIME_FORM}"
        )
        return Draft(prompt, _clock(start + delta))
    prompt = (
        f"On a 24-hour clock it is {_clock(start)}. What time was it {delta} minutes earlier? "
        f"{TIME_FORM}"
    )
    return Draft(prompt, _clock(start - delta))


def clock_duration(rng: random.Random) -> Draft:
    start = rng.randrange(23 * 60)
    end = rng.randint(start + 5, 24 * 60 - 1)
    prompt = (
        f"How many minutes are there from {_clock(start)} to {_clock(end)} on the same day? "
        f"{NUMBER_ONLY}"
    )
    return Draft(prompt, str(end - start))


def capitals(rng: random.Random) -> Draft:
    country, capital, pattern = rng.choice(CAPITALS)
    prompt = f"What is the capital of {country}? Reply with the city name only."
    return Draft(prompt, capital, class_pattern(pattern, [p for _, _, p in CAPITALS]))


def chemical_symbols(rng: random.Random) -> Draft:
    element, symbol = rng.choice(ELEMENTS)
    prompt = f"What is the chemical symbol of {element}? Reply with the symbol only."
    members = [s for _, s in ELEMENTS]
    return Draft(prompt, symbol, class_pattern(symbol, members, case_sensitive=True))


def days_in_month(rng: random.Random) -> Draft:
    month = 2 if rng.random() < 0.35 else rng.randint(1, 12)
    year = rng.choice([1700, 1800, 1900, 2000, 2100, 2400]) if rng.random() < 0.2 else 0
    year = year or rng.randint(1901, 2099)
    prompt = f"How many days are there in {MONTH_NAMES[month - 1]} {year}? {NUMBER_ONLY}"
    return Draft(prompt, str(calendar.monthrange(year, month)[1]))


Family = Callable[[random.Random], Draft]

# (family name, id prefix, generator), in the order of the shipped file.
FAMILIES: tuple[tuple[str, str, Family], ...] = (
    ("addition", "add", addition),
    ("subtraction", "sub", subtraction),
    ("multiplication-2x3", "mul23", multiplication_2x3),
    ("multiplication-3x3", "mul33", multiplication_3x3),
    ("division", "div", division),
    ("order-of-operations", "ops", order_of_operations),
    ("word-problems", "word", word_problems),
    ("percentages", "pct", percentages),
    ("unit-conversion", "unit", unit_conversion),
    ("letter-count", "letter", letter_count),
    ("ordering", "order", ordering),
    ("alphabetical", "alpha", alphabetical),
    ("weekday", "wday", weekday),
    ("days-between", "ddiff", days_between),
    ("date-add", "dadd", date_add),
    ("clock-add", "clock", clock_add),
    ("clock-duration", "dur", clock_duration),
    ("capitals", "cap", capitals),
    ("chemical-symbols", "chem", chemical_symbols),
    ("days-in-month", "month", days_in_month),
)


def generate_family(name: str, make: Family, count: int, seed: int = SEED) -> list[Draft]:
    """The first `count` distinct prompts `make` draws from this family's own seed."""
    rng = random.Random(f"{seed}:{name}")
    drafts: list[Draft] = []
    seen: set[str] = set()
    for _ in range(count * 200):
        draft = make(rng)
        if draft.prompt not in seen:
            seen.add(draft.prompt)
            drafts.append(draft)
            if len(drafts) == count:
                return drafts
    raise RuntimeError(f"family {name} gave only {len(drafts)} distinct prompts of {count}")


def generate(seed: int = SEED, per_family: int = PER_FAMILY) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for name, prefix, make in FAMILIES:
        for index, draft in enumerate(generate_family(name, make, per_family, seed), start=1):
            item: dict[str, Any] = {
                "id": f"{prefix}-{index:03d}",
                "family": name,
                "prompt": draft.prompt,
                "answer": draft.answer,
            }
            if draft.pattern is not None:
                re.compile(draft.pattern)  # a broken pattern fails here, not at scoring time
                item["pattern"] = draft.pattern
            items.append(item)
    return items


def render(seed: int = SEED, per_family: int = PER_FAMILY) -> str:
    """The shipped file: a JSON object with one question per line, so diffs stay readable."""
    items = generate(seed, per_family)
    families: dict[str, int] = {}
    for item in items:
        families[item["family"]] = families.get(item["family"], 0) + 1
    lines = [
        "{",
        f'  "name": {json.dumps(NAME)},',
        f'  "seed": {seed},',
        f'  "families": {json.dumps(families)},',
        '  "questions": [',
        ",\n".join("    " + json.dumps(item, ensure_ascii=False) for item in items),
        "  ]",
        "}",
    ]
    return "\n".join(lines) + "\n"


def bank_path() -> Path:
    return Path(__file__).parent / f"{NAME}.json"


if __name__ == "__main__":
    write_text_atomic(bank_path(), render())
