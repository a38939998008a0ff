"""The error tree: each kind carries the exit code the README documents, one function maps an
exception to it, and the old name `UserError` still catches every kind."""

from __future__ import annotations

import pytest

from sagemeter.errors import (
    EngineError,
    InputError,
    ManyProblems,
    PlatformError,
    SagemeterError,
    TransportError,
    UserError,
    exit_code,
    reworded,
)

DOCUMENTED = [  # README "Exit codes"
    (SagemeterError, 2),
    (InputError, 2),
    (PlatformError, 4),
    (EngineError, 5),
    (TransportError, 6),
]


@pytest.mark.parametrize(("kind", "code"), DOCUMENTED, ids=[k.__name__ for k, _ in DOCUMENTED])
def test_every_kind_maps_to_its_documented_exit_code(kind: type[SagemeterError], code: int) -> None:
    assert exit_code(kind("a message")) == code


def test_many_problems_is_input_and_exits_2() -> None:
    problems = ManyProblems("plan.toml", ["a: bad", "b: bad"])
    assert isinstance(problems, InputError) and exit_code(problems) == 2


def test_anything_else_is_exit_1() -> None:
    assert exit_code(ValueError("not ours")) == 1


@pytest.mark.parametrize("kind", [k for k, _ in DOCUMENTED])
def test_except_user_error_still_catches_every_kind(kind: type[SagemeterError]) -> None:
    assert UserError is SagemeterError
    with pytest.raises(UserError) as caught:
        raise kind("the message a person acts on")
    assert str(caught.value) == "the message a person acts on"


@pytest.mark.parametrize("kind", [k for k, _ in DOCUMENTED])
def test_a_reworded_error_keeps_its_kind(kind: type[SagemeterError]) -> None:
    again = reworded(kind("first"), "first (before that: more)")
    assert type(again) is kind and str(again) == "first (before that: more)"
    assert exit_code(again) == exit_code(kind("x"))
